"""`cocktail serve`: the private cloud's HTTP API for analysts (FastAPI; OpenAPI at /docs).

POST /v1/query  {"query": "2*count(a) - count(b & c)"} or {"batch": ["...", "..."]}
GET  /v1/budget
Authorization: Bearer <token>.  401 unknown or missing token, 403 disabled user, 429 budget
spent, 400 malformed query; a refused request spends nothing.
"""

from __future__ import annotations

from fastapi import Depends, FastAPI, HTTPException
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel, model_validator

from .dp.ledger import Ledger, LedgerError
from .dp.session import ask
from .publication import Publication
from .querylang import QuerySyntaxError, parse_batch
from .store import Store

bearer = HTTPBearer(auto_error=False)


class QueryRequest(BaseModel):
    query: str | None = None
    batch: list[str] | None = None

    @model_validator(mode="after")
    def one_of(self) -> "QueryRequest":
        if (self.query is None) == (self.batch is None):
            raise ValueError("send exactly one of 'query' and 'batch'")
        return self


def create_app(store: Store, ledger: Ledger, runner: str = "fast") -> FastAPI:
    app = FastAPI(title="Cocktail", version="1",
                  description="Differentially private counting, linear and batch linear queries "
                              "over a k^m-anonymous hybrid-cloud publication.")

    def token(credentials: HTTPAuthorizationCredentials | None = Depends(bearer)) -> str | None:
        return credentials.credentials if credentials else None

    def fail(exc: Exception) -> HTTPException:
        status = exc.status if isinstance(exc, LedgerError) else 400
        return HTTPException(status_code=status, detail=str(exc))

    @app.post("/v1/query")
    def query(request: QueryRequest, bearer_token: str | None = Depends(token)) -> dict:
        """Noisy answers with their expected squared errors; charges the caller's budget."""
        try:
            text = request.query if request.query is not None else "\n".join(request.batch)
            ledger.authenticate(bearer_token)  # 401/403 before any parsing or data access
            workload = parse_batch(text, "query")
            return ask(ledger, Publication.open(store), bearer_token, workload, runner)
        except (LedgerError, QuerySyntaxError) as exc:
            raise fail(exc) from None

    @app.get("/v1/budget")
    def budget(bearer_token: str | None = Depends(token)) -> dict:
        """What the caller has spent and has left, and the dataset-wide budget."""
        try:
            return ledger.budget_status(ledger.authenticate(bearer_token))
        except LedgerError as exc:
            raise fail(exc) from None

    return app

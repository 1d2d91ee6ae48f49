"""The certificate chain and key `cocktail serve` speaks HTTPS with, checked on load."""

from __future__ import annotations

import datetime
import os
import ssl
from dataclasses import dataclass, field

from cryptography import x509


EXPIRY_WARNING = datetime.timedelta(days=30)  # a certificate closer to its end is logged


@dataclass(frozen=True)
class Tls:
    """The certificate chain and key `cocktail serve` speaks HTTPS with, checked on load: each
    fault is one clear error before anything listens (exit status 2).  The key and its
    passphrase file must be the owner's alone, as ssh has it; every certificate of the chain
    valid now (clients would refuse the server); an encrypted key is opened with the
    passphrase file, never by asking on the terminal, which a daemon has none of (OpenSSL
    asks when given no passphrase)."""

    cert: str
    key: str
    expires: datetime.datetime  # when the first certificate of the chain ends
    password: str | None = field(default=None, repr=False)

    @classmethod
    def load(cls, cert: str, key: str, password_file: str | None = None) -> Tls:
        try:
            _owner_only(key, "--tls-key")
            password = _passphrase(password_file) if password_file else None
            expires = _valid_now(cert)
            ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(
                cert, key, password=lambda: password or _no_prompt(key))
        except (ssl.SSLError, OSError) as exc:
            mismatch = getattr(exc, "reason", None) == "KEY_VALUES_MISMATCH"
            hint = f" (is {password_file} the key's passphrase?)" \
                if password_file and not mismatch else ""
            raise ValueError(f"cannot use {cert} with {key} for TLS: {exc}{hint}") from None
        return cls(cert, key, expires, password)


def _owner_only(path: str, option: str) -> None:
    mode = os.stat(path).st_mode & 0o777
    if mode & 0o077:
        raise ValueError(f"{option} {path} is open to others (mode {mode:04o}): a secret must "
                         f"be its owner's alone. Run: chmod 600 {path}")


def _passphrase(path: str) -> str:
    _owner_only(path, "--tls-key-password-file")
    with open(path, encoding="utf-8") as file:
        passphrase = file.readline().rstrip("\r\n")
    if not passphrase:
        raise ValueError(f"--tls-key-password-file {path}: its first line is empty")
    return passphrase


def _no_prompt(key: str) -> str:
    raise ValueError(f"--tls-key {key} is encrypted: give its passphrase with "
                     "--tls-key-password-file FILE (the owner's alone), or decrypt the key "
                     "(openssl pkey -in KEY -out PLAIN); cocktail serve never asks for it")


def _valid_now(cert: str) -> datetime.datetime:
    """When the first certificate of the chain in ``cert`` ends, once each is valid now."""
    with open(cert, "rb") as file:
        try:
            chain = x509.load_pem_x509_certificates(file.read())
        except ValueError as exc:
            raise ValueError(f"--tls-cert {cert}: not a PEM certificate chain ({exc})") from None
    now = datetime.datetime.now(datetime.timezone.utc)
    for certificate in chain:
        subject = certificate.subject.rfc4514_string()
        start, end = certificate.not_valid_before_utc, certificate.not_valid_after_utc
        if end <= now:
            raise ValueError(f"--tls-cert {cert}: the certificate of {subject} expired on "
                             f"{end:%Y-%m-%d %H:%M} UTC; clients refuse it: renew it")
        if start > now:
            raise ValueError(f"--tls-cert {cert}: the certificate of {subject} is not valid "
                             f"before {start:%Y-%m-%d %H:%M} UTC; clients refuse it: check "
                             "this host's clock, or wait")
    return min(certificate.not_valid_after_utc for certificate in chain)

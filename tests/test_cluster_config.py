"""hadoop_conf/cluster.yaml and everything rendered from it: site files, topology, Vagrantfile."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET

import pytest
import yaml
from click.testing import CliRunner

from cocktail.cli import main
from cocktail.cluster.render import render_host
from cocktail.jvm import JAVA17_OPENS, SHORT_LIVED
from cocktail.cluster.spec import SITE_FILES, SpecError, load_spec, parse_spec

from .conftest import REPO

SPEC = REPO / "hadoop_conf" / "cluster.yaml"
DOCS_WITH_PROPERTIES = ("hadoop_conf/README.md",)
PROPERTY = re.compile(r"`((?:dfs|yarn|mapreduce|fs|net|hadoop|cocktail)\.[a-z0-9.-]+)`")


@pytest.fixture(scope="module")
def spec():
    return load_spec(SPEC)


@pytest.fixture(scope="module")
def rendered(tmp_path_factory, spec):
    out = tmp_path_factory.mktemp("conf")
    result = CliRunner().invoke(main, ["cluster", "render", "--spec", str(SPEC), "--out",
                                       str(out), "--json"])
    assert result.exit_code == 0, result.output
    assert set(json.loads(result.stdout)["written"]) == {h.name for h in spec.hosts}
    return out


def properties(conf_dir, name):
    root = ET.parse(conf_dir / name).getroot()
    return {p.findtext("name"): p.findtext("value") for p in root.iter("property")}


def all_properties(conf_dir):
    merged = {}
    for name in SITE_FILES:
        merged.update(properties(conf_dir, name))
    return merged


def test_the_reference_cluster_has_the_five_hosts_of_the_design(spec):
    sides = {h.name: h.side for h in spec.hosts}
    assert list(sides.values()).count("private") == 2 and list(sides.values()).count("public") == 3
    assert spec.namenode.private and spec.resourcemanager.private
    assert all(h.address.startswith("198.51.100.") for h in spec.hosts)


def test_site_files_parse_and_name_every_property_the_docs_rely_on(rendered, spec):
    documented = set()
    for doc in DOCS_WITH_PROPERTIES:
        documented |= set(PROPERTY.findall((REPO / doc).read_text()))
    assert len(documented) >= 10, documented
    for host in spec.hosts:
        present = all_properties(rendered / host.name)
        missing = sorted(documented - set(present))
        assert not missing, f"{host.name} lacks documented properties {missing}"
        assert present["fs.defaultFS"] == "hdfs://ck-private-1:8020"
        assert present["yarn.node-labels.enabled"] == "true"


def test_archive_volumes_only_on_private_datanodes(rendered, spec):
    for host in spec.hosts:
        volumes = properties(rendered / host.name, "hdfs-site.xml")["dfs.datanode.data.dir"]
        assert ("[ARCHIVE]" in volumes) == host.private, (host.name, volumes)


def test_placement_route_and_private_label(rendered, spec):
    hdfs = properties(rendered / spec.namenode.name, "hdfs-site.xml")
    assert hdfs["dfs.block.replicator.classname"] == "org.cocktail.hdfs.PrivateRackPlacementPolicy"
    assert hdfs["cocktail.private.root"] == spec.private_root
    raw = yaml.safe_load(SPEC.read_text())
    cold = parse_spec({**raw, "hadoop": {**raw["hadoop"], "placement": "cold"}})
    files = render_host(cold, cold.namenode)
    assert "dfs.block.replicator.classname" not in files["hdfs-site.xml"]
    labels = (rendered / spec.namenode.name / "node-labels").read_text().split()
    private_nms = {h.name for h in spec.with_roles("nodemanager") if h.private}
    assert labels == [f"{name}=private" for name in sorted(private_nms)]
    capacity = properties(rendered / spec.namenode.name, "capacity-scheduler.xml")
    assert capacity["yarn.scheduler.capacity.root.default.accessible-node-labels"] == "private"


def test_topology_script_maps_every_host_to_its_rack(rendered, spec):
    script = rendered / spec.namenode.name / "topology.sh"
    names = [h.name for h in spec.hosts]
    addresses = [h.address for h in spec.hosts]
    done = subprocess.run([str(script), *addresses, *names, "203.0.113.9"], capture_output=True,
                          text=True, check=True)
    racks = done.stdout.split()
    expected = [h.rack for h in spec.hosts]
    assert racks == expected + expected + ["/unknown/rack"]
    assert {r.count("/") for r in racks} == {2}, "racks must all have the same depth"


def test_hosts_and_workers_files(rendered, spec):
    conf = rendered / spec.namenode.name
    hosts = dict(line.split()[::-1] for line in (conf / "hosts").read_text().splitlines())
    assert hosts == {h.name: h.address for h in spec.hosts}
    assert (conf / "workers").read_text().split() == [h.name for h in spec.hosts]


def test_rendered_scripts_pass_shellcheck(rendered, spec):
    from .test_scripts import shellcheck

    shellcheck(rendered / spec.namenode.name / "topology.sh")


def test_overrides_and_paths(tmp_path, spec):
    result = CliRunner().invoke(main, [
        "cluster", "render", "--spec", str(SPEC), "--out", str(tmp_path), "--host", "ck-public-1",
        "--data", "/srv/{host}", "--set", "hdfs-site.xml:dfs.heartbeat.interval=1"])
    assert result.exit_code == 0, result.output
    hdfs = properties(tmp_path, "hdfs-site.xml")
    assert hdfs["dfs.heartbeat.interval"] == "1"
    assert hdfs["dfs.datanode.data.dir"] == "[DISK]file:///srv/ck-public-1/hdfs/disk"
    bad = CliRunner().invoke(main, ["cluster", "render", "--spec", str(SPEC), "--out",
                                    str(tmp_path), "--set", "nope.xml:a=b"])
    assert bad.exit_code == 2 and "cannot override nope.xml" in bad.output


def test_spec_properties_and_tls_reach_every_host(spec):
    """hadoop.properties win over the rendered values; the TLS pair makes the overlay https."""
    raw = yaml.safe_load(SPEC.read_text())
    raw["hadoop"]["properties"] = {"hdfs-site.xml": {"dfs.replication": 1,
                                                     "dfs.webhdfs.enabled": False}}
    tuned = parse_spec(raw)
    for host in tuned.hosts:
        hdfs = ET.fromstring(render_host(tuned, host)["hdfs-site.xml"])
        values = {p.findtext("name"): p.findtext("value") for p in hdfs.iter("property")}
        assert (values["dfs.replication"], values["dfs.webhdfs.enabled"]) == ("1", "false")
    env = render_host(spec, spec.hosts[3])["host.env"]
    assert "COCKTAIL_OVERLAY_URL=https://ck-private-1:8080" in env
    assert f"COCKTAIL_TLS_CERT={spec.tls_cert}" in env and spec.tls_cert.startswith("/")
    plain = parse_spec({key: value for key, value in raw.items() if key != "overlay"})
    assert "COCKTAIL_OVERLAY_URL=http://ck-private-1:8080" in render_host(
        plain, plain.hosts[0])["host.env"]


def test_daemons_get_the_specs_jvm_options_and_containers_short_lived_flags(spec):
    """hadoop.jvm_options follow the Java 17 flags in every host's jvm.options (the reference
    cluster has none); MapReduce's containers compile with C1 and collect with one thread."""
    raw = yaml.safe_load(SPEC.read_text())
    raw["hadoop"]["jvm_options"] = ["-XX:TieredStopAtLevel=1", "-Xss2m"]
    tuned = parse_spec(raw)
    for host in tuned.hosts:
        files = render_host(tuned, host)
        assert files["jvm.options"].split() == [*JAVA17_OPENS, "-XX:TieredStopAtLevel=1",
                                                "-Xss2m"]
        assert render_host(spec, host)["jvm.options"].split() == list(JAVA17_OPENS)
        mapred = ET.fromstring(files["mapred-site.xml"])
        values = {p.findtext("name"): p.findtext("value") for p in mapred.iter("property")}
        for name in ("yarn.app.mapreduce.am.command-opts", "mapreduce.map.java.opts",
                     "mapreduce.reduce.java.opts"):
            assert set(SHORT_LIVED) <= set(values[name].split())


@pytest.mark.parametrize("change, message", [
    (lambda s: s["hosts"][1].update(address="10.0.0.1"), "not a host address of"),
    (lambda s: s["hosts"][2].update(rack="/private/r9"), "must be /public/NAME"),
    (lambda s: s["hosts"][2].update(roles=["namenode"]), "exactly one host must have the namenode"),
    (lambda s: s["hosts"][1].update(rack="/private/r1"), "at least two /private/ racks"),
    (lambda s: s["hosts"][3].update(name="ck-public-1"), "duplicate name"),
    (lambda s: s["hadoop"].update(replication=3), "only 2 private datanodes"),
    (lambda s: s["hadoop"].update(placement="magic"), "hadoop.placement"),
    (lambda s: s["hosts"][0].update(side="public", rack="/public/r0"), "must be private"),
    (lambda s: s["hadoop"].update(properties={"hfds-site.xml": {"a": 1}}), "properties.hfds"),
    (lambda s: s["hadoop"].update(jvm_options="-Xss2m"), "jvm_options: expected a list"),
    (lambda s: s["hadoop"].update(jvm_options=["Xss2m"]), "'Xss2m' is not a JVM flag"),
    (lambda s: s["overlay"].pop("tls_key"), "both tls_cert and tls_key"),
    (lambda s: s["overlay"].update(tls_key="tls/overlay.key"), "overlay.tls_key"),
    (lambda s: s["overlay"].update(port=8443), "overlay.port: unknown key"),
])
def test_bad_cluster_files_are_refused_naming_the_key(change, message):
    raw = yaml.safe_load(SPEC.read_text())
    change(raw)
    with pytest.raises(SpecError, match=message):
        parse_spec(raw, "cluster.yaml")


def test_cli_reports_a_bad_file_cleanly(tmp_path):
    bad = tmp_path / "cluster.yaml"
    bad.write_text("hosts: [")
    result = CliRunner().invoke(main, ["cluster", "hosts", "--spec", str(bad)])
    assert result.exit_code == 2 and "not valid YAML" in result.output
    result = CliRunner().invoke(main, ["cluster", "hosts", "--spec", str(tmp_path / "none")])
    assert result.exit_code == 2 and "cannot read the cluster file" in result.output


def test_cli_lists_hosts_by_role_for_scripts():
    result = CliRunner().invoke(main, ["cluster", "hosts", "--spec", str(SPEC), "--role",
                                       "nodemanager", "--side", "private", "--field", "address"])
    assert result.output.split() == ["198.51.100.12"]


def ruby() -> str:
    found = shutil.which("ruby")
    if found is None:
        pytest.skip("ruby not installed: cannot run the Vagrantfile (.ci/run installs it)")
    return found


def test_vagrantfile_is_valid_ruby_and_reads_the_spec():
    done = subprocess.run([ruby(), "-c", str(REPO / "Vagrantfile")], capture_output=True,
                          text=True)
    assert done.returncode == 0 and "Syntax OK" in done.stdout, done.stderr
    text = (REPO / "Vagrantfile").read_text()
    assert "hadoop_conf" in text and "cluster.yaml" in text and "198.51.100" not in text


# Plays Vagrant: records every call the Vagrantfile makes on its config, as JSON.
VAGRANT_RECORDER = r"""
require "json"
class Rec
  def initialize
    @attrs, @calls, @subs = {}, [], {}
  end
  def method_missing(name, *args, **kw, &blk)
    n = name.to_s
    return @attrs[n.chomp("=")] = args[0] if n.end_with?("=")
    return (@subs[n] ||= Rec.new) if args.empty? && kw.empty? && blk.nil?
    child = nil
    if blk
      child = Rec.new
      blk.call(child)
    end
    @calls << { "call" => n, "args" => args, "kw" => kw.transform_keys(&:to_s),
                "block" => child && child.to_h }
    nil
  end
  def respond_to_missing?(*)
    true
  end
  def to_h
    { "attrs" => @attrs, "calls" => @calls, "subs" => @subs.transform_values(&:to_h) }
  end
end
module Vagrant
  def self.configure(_version)
    $root = Rec.new
    yield $root
  end
end
load ARGV[0]
puts JSON.generate($root.to_h)
"""


def vagrant_config() -> dict:
    done = subprocess.run([ruby(), "-e", VAGRANT_RECORDER, str(REPO / "Vagrantfile")],
                          capture_output=True, text=True, cwd=REPO)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def calls(node: dict, name: str) -> list[dict]:
    return [c for c in node["calls"] if c["call"] == name]


def test_the_vagrantfile_defines_the_spec_hosts_as_the_docs_say():
    """Run by Ruby against a recorder: one VM per host of cluster.yaml, in file order, with its
    name, address and memory (the 21.5 GB and 10 vCPUs docs/operations.md asks of the host),
    provisioned by scripts/provision for that host, then its daemons started at every boot."""
    spec = load_spec(SPEC)
    vm = vagrant_config()["subs"]["vm"]
    assert vm["attrs"]["box"] == "bento/debian-12"
    assert [c["args"] for c in calls(vm, "synced_folder")] == [[".", "/vagrant"]]
    defined = calls(vm, "define")
    assert [d["args"] for d in defined] == [[h.name] for h in spec.hosts]
    memory = cpus = 0
    for host, definition in zip(spec.hosts, defined):
        node = definition["block"]["subs"]["vm"]
        assert node["attrs"]["hostname"] == host.name
        assert [(c["args"], c["kw"]) for c in calls(node, "network")] == \
            [(["private_network"], {"ip": host.address})]
        (provider,) = calls(node, "provider")
        assert provider["args"] == ["virtualbox"]
        memory += provider["block"]["attrs"]["memory"]
        cpus += provider["block"]["attrs"]["cpus"]
        assert [(c["args"], c["kw"]) for c in calls(node, "provision")] == [
            (["shell"], {"name": "provision",
                         "inline": f"/vagrant/scripts/provision --host {host.name}"}),
            (["shell"], {"name": "daemons", "run": "always",
                         "inline": "/vagrant/scripts/daemons start"})]
    assert (memory, cpus) == (21504, 10)
    assert "21.5 GB of memory" in (REPO / "docs" / "operations.md").read_text()

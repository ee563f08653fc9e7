"""The release files: META.json against the PGXN Meta Spec 1.0.0, and the
version of the control file, META.json, the install and update scripts and
CHANGELOG.md agreeing with each other.  Needs no server."""
import json
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parent.parent
SEMVER = re.compile(r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[0-9A-Za-z-]+)?$")
LICENSES = {"agpl_3", "apache_1_1", "apache_2_0", "artistic_1", "artistic_2", "bsd",
            "freebsd", "gfdl_1_2", "gfdl_1_3", "gpl_1", "gpl_2", "gpl_3", "lgpl_2_1",
            "lgpl_3_0", "mit", "mozilla_1_0", "mozilla_1_1", "openssl", "perl_5",
            "postgresql", "qpl_1_0", "ssleay", "sun", "zlib", "open_source",
            "restricted", "unrestricted", "unknown"}
RELEASE_STATUS = {"stable", "testing", "unstable"}
PREREQ_PHASES = {"configure", "build", "test", "runtime", "develop"}
PREREQ_RELATIONS = {"requires", "recommends", "suggests", "conflicts"}


def control_version():
    text = (ROOT / "gpuclust.control").read_text()
    return re.search(r"^default_version = '([^']+)'", text, re.M).group(1)


def meta():
    return json.loads((ROOT / "META.json").read_text())


def test_meta_required_fields():
    m = meta()
    for key in ("name", "abstract", "version", "maintainer", "license", "provides",
                "meta-spec"):
        assert key in m, f"META.json lacks the required key {key!r}"
    assert re.fullmatch(r"[A-Za-z0-9_-]{2,}", m["name"]), m["name"]
    assert isinstance(m["abstract"], str) and m["abstract"].strip()
    assert SEMVER.match(m["version"]), m["version"]
    assert isinstance(m["maintainer"], (str, list)) and m["maintainer"]
    assert m["meta-spec"]["version"] == "1.0.0"
    lic = m["license"]
    names = [lic] if isinstance(lic, str) else list(lic)
    assert all(n in LICENSES or isinstance(lic, dict) for n in names), lic


def test_meta_provides_and_prereqs():
    m = meta()
    assert m["provides"], "provides is empty"
    for ext, p in m["provides"].items():
        assert {"file", "version"} <= p.keys(), ext
        assert SEMVER.match(p["version"]), p["version"]
        assert (ROOT / p["file"]).is_file(), p["file"]
        if "docfile" in p:
            assert (ROOT / p["docfile"]).is_file(), p["docfile"]
    for phase, rels in m.get("prereqs", {}).items():
        assert phase in PREREQ_PHASES, phase
        for rel, reqs in rels.items():
            assert rel in PREREQ_RELATIONS, rel
            for name, ver in reqs.items():
                assert ver == 0 or SEMVER.match(str(ver)) or re.match(r"^[<>=!]", str(ver)), (name, ver)
    if "release_status" in m:
        assert m["release_status"] in RELEASE_STATUS
    allowed = {"name", "abstract", "description", "version", "maintainer", "license",
               "provides", "prereqs", "resources", "generated_by", "meta-spec", "tags",
               "no_index", "release_status"}
    extra = [k for k in m if k not in allowed and not k.startswith("x_") and not k.startswith("X_")]
    assert not extra, f"unknown META.json keys {extra}"


def test_versions_agree():
    v = control_version()
    m = meta()
    assert m["version"] == v
    assert m["provides"]["gpuclust"]["version"] == v
    assert (ROOT / f"sql/gpuclust--{v}.sql").is_file()
    assert f"## {v}" in (ROOT / "CHANGELOG.md").read_text()


def test_every_release_has_an_update_path():
    """Each earlier install script has an update script, and the chain reaches the default."""
    v = control_version()
    scripts = [p.name for p in (ROOT / "sql").glob("gpuclust--*.sql")]
    installs = sorted(re.fullmatch(r"gpuclust--([^-]+)\.sql", s).group(1)
                      for s in scripts if re.fullmatch(r"gpuclust--([^-]+)\.sql", s))
    updates = dict(re.fullmatch(r"gpuclust--([^-]+)--([^-]+)\.sql", s).groups()
                   for s in scripts if re.fullmatch(r"gpuclust--([^-]+)--([^-]+)\.sql", s))
    assert v in installs
    for old in installs:
        seen = {old}
        cur = old
        while cur != v:
            assert cur in updates, f"no update script from {cur}"
            cur = updates[cur]
            assert cur not in seen, "update scripts form a cycle"
            seen.add(cur)

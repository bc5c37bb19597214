"""One options model per command (inferwatch/options.py): the flags typer parses, the YAML keys, their checks and
the README tables all come from it, so flags and YAML give the same config, a wrong key says where and what is
valid, and a README table that no longer matches its model fails."""

from __future__ import annotations

import dataclasses

import pytest
import typer
from conftest import ROOT
from test_cli_errors import run  # the command as a user runs it

from inferwatch import reference
from inferwatch.canary import CanaryOptions
from inferwatch.cost import CostCompileOptions
from inferwatch.deploy import Config, DoctorOptions, parse_config
from inferwatch.deploy import reference_table as deploy_table
from inferwatch.exporters import ExporterConfig, GpuOptions, load_config
from inferwatch.frontdoor import FrontdoorOptions, ProbeOptions
from inferwatch.options import (
    flag_parameters,
    from_flags,
    option,
    options_of,
    read_yaml,
    reference_table,
    section_markers,
    with_section,
)
from inferwatch.promapi_flags import ConnectionOptions
from inferwatch.sim import CapacityCompareOptions, DemoOptions, LoadOptions, SimulateOptions, SweepOptions
from inferwatch.slo import CompileOptions, ImportOptions
from inferwatch.triage import TriageOptions


def given_flags(command: str, args: list[str]) -> dict:
    """What typer hands `inferwatch COMMAND` for `args`, parsed by the real command line (nothing run)."""
    from inferwatch.cli import app

    found = typer.main.get_command(app)
    for name in command.split():
        found = found.commands[name]  # type: ignore[attr-defined]
    with found.make_context(command, list(args)) as ctx:
        return dict(ctx.params)


# every option of the exporter, set away from its default, once as flags and once as YAML
EXPORTER_FLAGS = [
    *("--target", "vllm=http://vllm:8000/metrics", "--target", "localhost:9000"),
    *("--listen", "127.0.0.1:9500", "--timeout", "2s", "--max-running-requests", "llama=8"),
    *("--source", "vllm", "--drop-unmapped", "--target-label", "instance", "--min-interval", "250ms"),
    *("--max-labels", "10", "--max-connections", "7", "--max-body", "1MiB", "-m", "extra.yaml"),
]
EXPORTER_YAML = """\
targets: [{name: vllm, url: "http://vllm:8000/metrics"}, "localhost:9000"]
listen: 127.0.0.1:9500
timeout: 2s
max_running_requests: {llama: 8}
source: vllm
drop_unmapped: true
target_label: instance
min_interval: 250ms
max_labels: 10
max_connections: 7
max_body: 1MiB
mappings: [extra.yaml]
"""


def test_exporter_flags_and_yaml_give_the_same_config(tmp_path):
    cfg = tmp_path / "exporter.yaml"
    cfg.write_text(EXPORTER_YAML)
    from_yaml = load_config(str(cfg))
    flags = given_flags("exporter normalize", EXPORTER_FLAGS)
    assert flags.pop("config") is None and flags.pop("log_level") == "info"
    assert from_flags(ExporterConfig, flags) == from_yaml
    # every option was set: a new one is added to both lists above (max_connections was YAML-only once)
    unchanged = [n.name for n in options_of(ExporterConfig) if getattr(from_yaml, n.name) == n.default]
    assert not unchanged, unchanged
    assert from_yaml.max_connections == 7 and (from_yaml.host, from_yaml.port) == ("127.0.0.1", 9500)


def test_exporter_flags_add_to_the_files_lists_and_replace_its_values(tmp_path):
    cfg = tmp_path / "exporter.yaml"
    cfg.write_text("targets: [a:1]\nmax_connections: 5\nmax_labels: 3\n")
    flags = given_flags("exporter normalize", ["--target", "b:2", "--max-connections", "9", "--config", str(cfg)])
    merged = from_flags(ExporterConfig, flags, load_config(str(flags["config"])))
    assert [t.name for t in merged.targets] == ["a:1", "b:2"]
    assert (merged.max_connections, merged.max_labels) == (9, 3)


def test_the_documented_defaults_are_the_models():
    """Each default the help and the tables print parses to the field's default."""
    for model in (ExporterConfig, FrontdoorOptions, ProbeOptions):
        for named in options_of(model):
            if named.option.shown and named.option.parse:
                assert named.parse(named.option.shown) == named.default, (model.__name__, named.name)
    assert from_flags(FrontdoorOptions, given_flags("frontdoor", [])) == FrontdoorOptions()
    probe = given_flags("probe", ["--target", "a:1", "--model", "m"])
    assert from_flags(ProbeOptions, probe) == ProbeOptions("http://a:1", ("m",))


def test_an_unknown_key_names_its_line_and_the_valid_keys(tmp_path):
    cfg = tmp_path / "exporter.yaml"
    cfg.write_text("targets: [localhost:8000]\nmax_conections: 8\n")
    proc = run("exporter", "normalize", "--config", str(cfg))
    assert "Traceback" not in proc.stderr and proc.returncode == 1, proc.stderr
    valid = ", ".join(str(n.key) for n in options_of(ExporterConfig))
    assert proc.stderr == (
        f"error: {cfg}:2: max_conections: unknown key; did you mean 'max_connections'? (valid: {valid})\n"
    )


@pytest.mark.parametrize(
    "text, line, words",
    [
        ("targets: [localhost:8000, 'ftp://x']\n", 1, "targets[1]: 'ftp://x' is not an http(s) URL"),
        ("targets: [a:1]\nmax_running_requests: {llama: 0}\n", 2, "max_running_requests.llama: expected a positive"),
        ("targets: [a:1]\nmax_running_requests: [llama=8]\n", 2, "max_running_requests: expected a mapping of model"),
        ("targets: a:1\n", 1, "targets: expected a list of targets"),
        ("targets: [a:1]\ndrop_unmapped: 'no'\n", 2, "drop_unmapped: expected true or false, got 'no'"),
        ("targets: [a:1]\n\nmax_body: 16\n", 3, "max_body: 16 is under 1KiB"),
    ],
)
def test_a_bad_value_names_its_line(tmp_path, text, line, words):
    from inferwatch.errors import SpecError

    cfg = tmp_path / "exporter.yaml"
    cfg.write_text(text)
    with pytest.raises(SpecError) as err:
        load_config(str(cfg))
    assert str(err.value).startswith(f"{cfg}:{line}: {words}"), str(err.value)


def test_a_flag_its_parser_refuses_is_one_usage_line():
    proc = run("exporter", "normalize", "--target", "a:1", "--max-connections", "0")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.startswith("error: Invalid value for --max-connections: '0' is not a whole number >= 1")


def test_the_readme_tables_are_the_models():
    """`inferwatch build` writes each table; a table edited by hand, or a model changed without a build, fails."""
    for path, sections in reference.reference_sections().items():
        if path.is_file():
            text = path.read_text(encoding="utf-8")
            for name, table in sections.items():
                begin, end = section_markers(name)
                assert f"{begin}\n\n{table}\n\n{end}" in text, f"{path}: run `inferwatch build`"
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "| `--max-connections` `N` | `max_connections` | `100` |" in readme
    assert "| `engines[].role_label` |" in (ROOT / "deploy" / "README.md").read_text(encoding="utf-8")


def test_a_drifted_table_is_stale(monkeypatch, tmp_path):
    readme = tmp_path / "README.md"
    begin, end = section_markers("exporter-options")
    readme.write_text(f"# x\n\n{begin}\n\n| flag |\n|---|\n| `--gone` |\n\n{end}\n")
    monkeypatch.setattr(reference, "reference_sections", lambda: {readme: {"exporter-options": "| new |"}})
    stale = reference.stale_sections()
    assert [path for path, _ in stale] == [readme]
    assert stale[0][1] == with_section(readme.read_text(), "exporter-options", "| new |")
    assert f"{begin}\n\n| new |\n\n{end}" in stale[0][1]


def test_every_deploy_key_is_in_the_table():
    table = deploy_table()
    sections = {f.name for f in dataclasses.fields(Config) if dataclasses.is_dataclass(f.default)}
    for f in dataclasses.fields(Config):
        if f.name == "file":
            continue
        if f.name in sections:
            for sub in dataclasses.fields(f.default):
                assert f"| `{f.name}.{sub.name}` |" in table, (f.name, sub.name)
        else:
            assert f"| `{f.name}` |" in table, f.name
    config = parse_config({"version": 1, "engines": [{"name": "a", "selector": {"app": "a"}, "role_label": "x"}]})
    assert config.engines[0].role_label == "x"


@dataclasses.dataclass(frozen=True)
class Small:
    names: tuple[str, ...] = option((), "Names.", repeatable=True, flag="--name", key="names")
    only_yaml: int = option(3, "A key.", flag=None, parse=int, only="a file's setting")
    only_flag: bool = option(False, "A switch.", kind=bool, key=None, only="for one run")


def test_a_model_says_which_side_an_option_is_missing_from():
    table = reference_table(Small)
    assert "| `--name` | `names` |  | Names. |" in table
    assert "|  | `only_yaml` | `3` | A key. (YAML only: a file's setting) |" in table
    assert "| `--only-flag` |  | `false` | A switch. (flag only: for one run) |" in table
    assert read_yaml(Small, {"names": ["a"], "only_yaml": 4}, "x.yaml") == Small(("a",), 4)
    with pytest.raises(Exception, match="only_flag: unknown key"):
        read_yaml(Small, {"only_flag": True}, "x.yaml")
    with pytest.raises(Exception, match=r"x.yaml: target: required: An OpenAI-compatible server"):
        read_yaml(ProbeOptions, {"model": ["m"]}, "x.yaml")


def test_the_readmes_exporter_yaml_example_loads(tmp_path):
    """README.md's `--config exporter.yaml` example uses only keys of the model, each with a valid value."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    example = readme.split("`--config exporter.yaml`:\n\n```yaml\n", 1)[1].split("```", 1)[0]
    cfg = tmp_path / "exporter.yaml"
    cfg.write_text(example)
    assert load_config(str(cfg)).max_connections == 100


def test_the_gpu_exporters_flags_reach_its_config():
    """`exporter gpu`'s model checks and types each flag; exporter_config adds what reads two and the host's."""
    from inferwatch.exporters import GpuOptions
    from inferwatch.exporters.gpu._config import exporter_config, gpu_config

    assert exporter_config(GpuOptions()) == gpu_config()
    flags = given_flags("exporter gpu", ["--backend", "simulated", "--gpus", "2", "--max-connections", "5"])
    flags.pop("log_level")
    config = exporter_config(from_flags(GpuOptions, flags))
    assert (config.backend, config.gpus, config.max_connections, config.port) == ("simulated", 2, 5, 9401)


@pytest.mark.parametrize(
    "args, line",
    [
        (["--interval", "50ms"], "Invalid value for --interval: '50ms': use 100ms to 1h, e.g. 1s"),
        (["--backend", "cuda"], "Invalid value for --backend: 'cuda': use nvml or simulated"),
        (["--gpus", "2"], "Invalid value for --gpus: only with --backend simulated"),
        (["--backend", "simulated", "--gpus", "65"], "Invalid value for --gpus: 65: use 1 to 64"),
        (["--backend", "simulated", "--scenario", "x"], "Invalid value for --scenario: 'x': use normal or stall"),
        (["--backend", "simulated", "--workload", "a"], "Invalid value for --workload: 'a': use NAMESPACE/POD or"),
        (["--backend", "simulated", "--follow", "ftp://x"], "Invalid value for --follow: 'ftp://x' is not an http"),
        (["--idle-timeout", "10ms"], "Invalid value for --idle-timeout: '10ms': use at least 0.1s"),
        (["--stale-after", "500ms"], "Invalid value for --stale-after: 0.5s is under --interval 1s: use at least 1s"),
        (["--max-connections", "0"], "Invalid value for --max-connections: 0: use 1 to 65536"),
        (["--pod-resources-socket", "/" + "x" * 120], "a unix socket path is at most 107 bytes"),
        (["--listen", "x"], "Invalid value for --listen: 'x' is not HOST:PORT"),
    ],
)
def test_a_wrong_gpu_exporter_flag_is_one_usage_line(args, line):
    """Each flag is checked by its field of GpuOptions (what reads two flags by exporter_config): one line naming
    it, exit 2, before anything is sampled."""
    proc = run("exporter", "gpu", *args)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.startswith("error: ") and line in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr


def test_an_empty_yaml_value_is_the_default(tmp_path):
    cfg = tmp_path / "exporter.yaml"
    cfg.write_text("targets: [a:1]\nsource:\nmappings:\nmax_running_requests:\ntarget_label:\n")
    config = load_config(str(cfg))
    assert (config.source, config.mappings, config.max_running_requests, config.target_label) == (None, (), (), "")


def test_hand_written_tables_give_the_models_defaults():
    """A prose table that names a flag and its default (frontdoor/README.md's client limits) says the model's."""
    import re

    text = (ROOT / "frontdoor" / "README.md").read_text(encoding="utf-8")
    shown = {n.flag: n.default_text for n in options_of(FrontdoorOptions)}
    rows = re.findall(r"^\s*\| `(--[a-z-]+)` \| ([^|`]+?) \|", text, re.M)
    assert len(rows) >= 6, rows
    for flag, default in rows:
        assert shown[flag] == default, (flag, default, shown[flag])


def test_deploy_backend_is_a_key_and_a_flag():
    from_file = parse_config({"version": 1, "backend": "victoriametrics"})
    flags = given_flags("deploy render", ["-o", "out", "--backend", "victoriametrics"])
    for own in ("out", "config", "target"):
        flags.pop(own)
    assert from_flags(Config, flags, Config()) == dataclasses.replace(from_file, file=Config().file)
    proc = run("deploy", "render", "-o", "out", "--backend", "nope")
    assert proc.returncode == 1 and proc.stderr == "error: --backend 'nope': use one of prometheus, victoriametrics\n"


# each command whose flags are its model: (command, model, the required flags as a user gives them)
COMMANDS = [
    ("triage", TriageOptions, []),
    ("doctor", DoctorOptions, []),
    ("slo compile", CompileOptions, ["x.yaml"]),
    ("slo import", ImportOptions, ["x.yaml"]),
    ("demo", DemoOptions, []),
    ("simulate", SimulateOptions, []),
    ("load", LoadOptions, ["--target", "a:1"]),
    ("capacity sweep", SweepOptions, ["--target", "a:1"]),
    ("capacity compare", CapacityCompareOptions, ["a.json", "b.json"]),
    ("canary", CanaryOptions, ["--model", "m", "--canary", "v=2", "--stable", "v=1"]),
    ("cost compile", CostCompileOptions, ["x.yaml"]),
    ("exporter gpu", GpuOptions, []),
    # the connection flags triage, doctor and canary share (inferwatch/promapi_flags.py)
    ("triage", ConnectionOptions, []),
    ("doctor", ConnectionOptions, []),
    ("canary", ConnectionOptions, ["--model", "m", "--canary", "v=2", "--stable", "v=1"]),
]


@pytest.mark.parametrize("command, model, required", COMMANDS, ids=[f"{c[0]}-{c[1].__name__}" for c in COMMANDS])
def test_a_commands_flags_are_its_model(command, model, required):
    """Every field with a flag is a parameter of the command as click parses it, and the flags left out parse to
    the model's defaults (so --help's defaults, the table's and the model's agree)."""
    given = given_flags(command, required)
    flags = {n.name for n in options_of(model) if n.flag}
    assert flags <= set(given), flags - set(given)
    parsed = from_flags(model, {k: v for k, v in given.items() if k in flags})
    defaults = {n.name: n.default for n in options_of(model) if n.default is not dataclasses.MISSING}
    assert {k: v for k, v in dataclasses.asdict(parsed).items() if k in defaults} == defaults
    for named in options_of(model):
        if named.option.shown and named.option.parse:
            assert named.parse(named.option.shown) == named.default, named.name


def test_simulates_help_names_every_release():
    """--engine-version's help spells out sim/releases.yaml's releases (so --help need not read it)."""
    from inferwatch.sim import releases
    from inferwatch.sim._cli_options import ENGINE_VERSIONS

    assert ENGINE_VERSIONS == "; ".join(f"{e} {', '.join(releases(e))}" for e in ("vllm", "sglang"))


def test_deploy_yaml_is_read_by_the_options_reader_in_the_files_order(tmp_path):
    """deploy.yaml goes through options.read_mapping like every command's YAML: sections and engines[] are read
    as their models in turn, each problem at its line with its path, in the file's order; a missing required key
    says what it is."""
    from inferwatch.deploy import load_config
    from inferwatch.errors import SpecError

    cfg = tmp_path / "deploy.yaml"
    cfg.write_text(
        "version: 1\nnvml: 5\nfrontdoor: {replicas: 0, bogus: 1}\nengines:\n  - engine: vllm\ngrafana_folder: 7\n"
    )
    with pytest.raises(SpecError) as err:
        load_config(cfg)
    assert [(p.line, p.field) for p in err.value.problems] == [
        (None, "nvml"),
        (3, "frontdoor.bogus"),
        (3, "frontdoor.replicas"),
        (5, "engines[0].name"),
        (6, "grafana_folder"),
    ]
    assert str(err.value.problems[3]).endswith(
        "engines[0].name: required: The fleet's name (a Kubernetes name), unique among the engines."
    )


def test_the_connection_flags_table_is_triages_and_the_others_link_it():
    """ConnectionOptions' table is written once (triage/README.md), registered for `inferwatch build --check`, and
    doctor's and canary's READMEs point to it; its defaults are the client's."""
    from inferwatch.promapi import DEFAULT_MAX_BYTES, DEFAULT_TIMEOUT

    triage_readme = ROOT / "triage" / "README.md"
    sections = reference.reference_sections()
    assert "connection-options" in sections[triage_readme]
    assert [name for file in sections.values() for name in file].count("connection-options") == 1
    text = triage_readme.read_text(encoding="utf-8")
    assert f"| `--timeout` `SECONDS` | `{DEFAULT_TIMEOUT}` |" in text
    assert f"| `--max-bytes` `BYTES` | `{DEFAULT_MAX_BYTES}` |" in text
    for readme in ("deploy", "canary"):
        assert "../triage/README.md#connection-flags" in (ROOT / readme / "README.md").read_text(encoding="utf-8")


@pytest.mark.parametrize(
    "name, field",
    [
        ("header_x", option((), "An HTTP header for every request.", repeatable=True)),  # a flag renamed
        ("timeout", option(31.0, "The most one request may take.", kind=float)),  # a default changed
    ],
)
def test_a_drifted_connection_flag_is_a_stale_table(monkeypatch, name, field):
    """A connection flag renamed, or its default changed, in the model without a build: the table is stale."""
    drifted_model = dataclasses.make_dataclass("ConnectionOptions", [(name, object, field)], frozen=True)
    triage_readme = ROOT / "triage" / "README.md"
    sections = reference.reference_sections()[triage_readme]
    drifted = {**sections, "connection-options": reference_table(drifted_model, keys=False)}
    monkeypatch.setattr(reference, "reference_sections", lambda: {triage_readme: drifted})
    assert [path for path, _ in reference.stale_sections()] == [triage_readme]


def test_the_connection_flags_are_the_models_in_one_panel():
    """Every connection flag comes from ConnectionOptions, in field order, in the one --help panel."""
    params = flag_parameters(ConnectionOptions)
    assert [p.name for p in params] == [n.name for n in options_of(ConnectionOptions)]
    assert {n.option.panel for n in options_of(ConnectionOptions)} == {"Connection (auth, TLS, proxy, limits)"}

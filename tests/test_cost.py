"""Cost rules (cost/): the example price table compiled, then run by promtool on series shaped as NVML or DCGM
and the engines serve them, against dollars worked out by hand; and clear errors for a wrong cost file."""

from __future__ import annotations

import subprocess
import sys

import pytest
import yaml
from conftest import ROOT, need

from inferwatch.cost import RECORDS, load_cost, parse_cost, render_cost
from inferwatch.errors import SpecError
from inferwatch.slo import check_rule_files, run_rule_tests

EXAMPLE = ROOT / "cost" / "example.yaml"
H100, H200, T4 = "NVIDIA H100 80GB HBM3", "NVIDIA H200", "Tesla T4"


def _gpu(pod: str, uuid: str, model: str, host: str = "node-1", **extra) -> str:
    labels = {"namespace": "ml" if pod else "", "pod": pod, "uuid": uuid, "gpu_model": model, "hostname": host, **extra}
    return "gpu_memory_used_bytes{" + ", ".join(f'{k}="{v}"' for k, v in labels.items() if v) + "}"


# pod vllm-a: two H100s (one shown as two MIG instances), serving llama and a LoRA adapter; pod vllm-b: an H200
# on a spot host (the by_label price wins over the model's), serving llama, idle; an unallocated H200; pod
# notebook: an unlisted model (the default price), no engine at all: idle too.
SERIES = [
    (_gpu("vllm-a", "GPU-1", H100), "1+0x180"),
    (_gpu("vllm-a", "GPU-2", H100, GPU_I_ID="1"), "1+0x180"),
    (_gpu("vllm-a", "GPU-2", H100, GPU_I_ID="2"), "1+0x180"),
    (_gpu("vllm-b", "GPU-3", H200, "spot-7"), "1+0x180"),
    (_gpu("", "GPU-4", H200), "1+0x180"),
    (_gpu("notebook", "GPU-5", T4), "1+0x180"),
    ('llm_requests_running{namespace="ml", pod="vllm-a", model="llama"}', "1+0x180"),
    ('llm_requests_running{namespace="ml", pod="vllm-a", model="llama-lora"}', "1+0x180"),
    ('llm_requests_running{namespace="ml", pod="vllm-b", model="llama"}', "0+0x180"),
    ('llm_requests_finished_total{namespace="ml", pod="vllm-a", model="llama"}', "0+60x180"),
    ('llm_requests_finished_total{namespace="ml", pod="vllm-b", model="llama"}', "0+0x180"),
    # llama: 100 tokens/s generated, 400 prompt tokens/s of which 100 from the cache; 1 good request/s
    ('llm_generation_tokens_total{namespace="ml", pod="vllm-a", model="llama"}', "0+6000x180"),
    ('llm_prompt_tokens_total{namespace="ml", pod="vllm-a", model="llama"}', "0+24000x180"),
    ('llm_prompt_tokens_cached_total{namespace="ml", pod="vllm-a", model="llama"}', "0+6000x180"),
    ('llm_frontdoor_goodput_good_requests_total{model="llama", caller="a", upstream="u"}', "0+60x180"),
    # qwen on SGLang, which counts cached prompt tokens as prefix-cache hits: 100 of 400 a second again
    (_gpu("sglang-c", "GPU-6", H200), "1+0x180"),
    ('llm_requests_running{namespace="ml", pod="sglang-c", model="qwen"}', "1+0x180"),
    ('llm_requests_finished_total{namespace="ml", pod="sglang-c", model="qwen"}', "0+60x180"),
    ('llm_generation_tokens_total{namespace="ml", pod="sglang-c", model="qwen"}', "0+6000x180"),
    ('llm_prompt_tokens_total{namespace="ml", pod="sglang-c", model="qwen"}', "0+24000x180"),
    ('llm_prefix_cache_hit_tokens_total{namespace="ml", pod="sglang-c", model="qwen"}', "0+6000x180"),
    # llama-lora: 50 tokens/s, prompt tokens but no cache counter at all (every prompt token computed)
    ('llm_generation_tokens_total{namespace="ml", pod="vllm-a", model="llama-lora"}', "0+3000x180"),
    ('llm_prompt_tokens_total{namespace="ml", pod="vllm-a", model="llama-lora"}', "0+3000x180"),
]
UPLIFT = 1.15
POD_A, POD_B, FREE, NOTEBOOK = 2 * 2.49 * UPLIFT, 1.10 * UPLIFT, 3.59 * UPLIFT, 2.00 * UPLIFT
LLAMA, LORA = POD_A / 2 + POD_B, POD_A / 2
EXPECTED = {
    "llm_cost:pod_dollars_per_hour": [
        ({"namespace": "ml", "pod": "notebook"}, NOTEBOOK),
        ({"namespace": "ml", "pod": "sglang-c"}, FREE),
        ({"namespace": "ml", "pod": "vllm-a"}, POD_A),
        ({"namespace": "ml", "pod": "vllm-b"}, POD_B),
    ],
    "llm_cost:unallocated_dollars_per_hour": [({}, FREE)],
    "llm_cost:model_dollars_per_hour": [
        ({"model": "llama"}, LLAMA),
        ({"model": "llama-lora"}, LORA),
        ({"model": "qwen"}, FREE),
    ],
    "llm_cost:idle_dollars_per_hour": [
        ({"namespace": "ml", "pod": "notebook"}, NOTEBOOK),
        ({"namespace": "ml", "pod": "vllm-b"}, POD_B),
    ],
    "llm_cost:dollars_per_million_output_tokens": [
        ({"model": "llama"}, LLAMA / 0.36),
        ({"model": "llama-lora"}, LORA / 0.18),
        ({"model": "qwen"}, FREE / 0.36),
    ],
    "llm_cost:dollars_per_million_prompt_tokens_computed": [
        ({"model": "llama"}, LLAMA / 1.08),
        ({"model": "llama-lora"}, LORA / 0.18),
        ({"model": "qwen"}, FREE / 1.08),
    ],
    "llm_cost:dollars_per_good_request": [({"model": "llama"}, LLAMA / 3600)],
}


def test_example_cost_rules_give_the_dollars_worked_out_by_hand(tmp_path):
    need("promtool")
    rules = tmp_path / "cost.rules.yaml"
    rules.write_text(render_cost(load_cost(EXAMPLE)))
    ok, output = check_rule_files([rules])
    assert ok, output
    cases = [
        {
            "expr": name,
            "eval_time": "2h",
            "exp_samples": [
                {
                    "labels": name
                    + "{"
                    + ", ".join(
                        f'{k}="{v}"'
                        for k, v in {
                            **labels,
                            **({"currency": "USD"} if name != "llm_cost:model_share" else {}),
                        }.items()
                    )
                    + "}",
                    "value": value,
                }
                for labels, value in samples
            ],
        }
        for name, samples in EXPECTED.items()
    ]
    cases.append({"expr": "llm_cost:unpriced_gpus", "eval_time": "2h", "exp_samples": []})
    test = tmp_path / "cost.test.yaml"
    test.write_text(
        yaml.safe_dump(
            {
                "rule_files": [rules.name],
                "evaluation_interval": "1m",
                "tests": [
                    {
                        "interval": "1m",
                        "input_series": [{"series": s, "values": v} for s, v in SERIES],
                        "promql_expr_test": cases,
                    }
                ],
            },
            sort_keys=False,
        )
    )
    ok, output = run_rule_tests([test])
    assert ok, output


def test_a_model_missing_from_the_table_without_default_is_counted_unpriced(tmp_path):
    need("promtool")
    rules = tmp_path / "cost.rules.yaml"
    rules.write_text(render_cost(parse_cost({"gpu_hour": {H100: 2.49}}, "cost.yaml")))
    test = tmp_path / "cost.test.yaml"
    test.write_text(
        yaml.safe_dump(
            {
                "rule_files": [rules.name],
                "evaluation_interval": "1m",
                "tests": [
                    {
                        "interval": "1m",
                        "input_series": [
                            {"series": _gpu("a", "GPU-1", H100), "values": "1+0x10"},
                            {"series": _gpu("b", "GPU-2", T4), "values": "1+0x10"},
                        ],
                        "promql_expr_test": [
                            {
                                "expr": "llm_cost:unpriced_gpus",
                                "eval_time": "5m",
                                "exp_samples": [{"labels": f'llm_cost:unpriced_gpus{{gpu_model="{T4}"}}', "value": 1}],
                            },
                            {
                                "expr": "llm_cost:pod_dollars_per_hour",
                                "eval_time": "5m",
                                "exp_samples": [
                                    {
                                        "labels": "llm_cost:pod_dollars_per_hour"
                                        '{currency="USD", namespace="ml", pod="a"}',
                                        "value": 2.49,
                                    }
                                ],
                            },
                        ],
                    }
                ],
            },
            sort_keys=False,
        )
    )
    ok, output = run_rule_tests([test])
    assert ok, output


@pytest.mark.parametrize(
    "doc, says",
    [
        ({"gpu_hour": {H100: "cheap"}}, f"gpu_hour.{H100}: 'cheap' is no price"),
        ({"gpu_hour": {H100: -1}}, "is no price"),
        ({"gpu_hour": {}}, "gpu_hour: a mapping of GPU model"),
        ({"gpu_hour": {H100: 2}, "overhead": "lots"}, "overhead: 'lots': a share such as 15%"),
        (
            {"gpu_hour": {H100: 2}, "by_label": [{"label": "host-name", "match": "x", "gpu_hour": 1}]},
            "by_label[0].label: 'host-name' is no label name",
        ),
        (
            {"gpu_hour": {H100: 2}, "by_label": [{"label": "hostname", "match": "(", "gpu_hour": 1}]},
            "by_label[0].match",
        ),
        ({"gpu_hour": {H100: 2}, "prices": {}}, "prices: unknown key"),
    ],
)
def test_a_wrong_cost_file_names_the_field_and_what_is_valid(doc, says):
    with pytest.raises(SpecError) as err:
        parse_cost(doc, "cost.yaml")
    assert "cost.yaml" in str(err.value) and says in str(err.value)


def test_the_cli_compiles_the_example_and_refuses_a_wrong_file_without_a_traceback(tmp_path):
    out = tmp_path / "rules"
    proc = subprocess.run(
        [sys.executable, "-m", "inferwatch", "cost", "compile", str(EXAMPLE), "-o", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    rules = yaml.safe_load((out / "example.cost.rules.yaml").read_text())["groups"][0]["rules"]
    assert [r["record"] for r in rules] == list(RECORDS)
    bad = tmp_path / "bad.yaml"
    bad.write_text("gpu_hour:\n  H100: cheap\n")
    proc = subprocess.run(
        [sys.executable, "-m", "inferwatch", "cost", "compile", str(bad), "-o", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode != 0 and "Traceback" not in proc.stderr and f"{bad}:2" in proc.stderr

"""Serving GLM-5 with SGLang: profiles, SGLang's real flag tables, a validator, the launch command, and a
crash/log signature engine.

- :mod:`gpuhost.serve.flagtable` — the argparse tables extracted from released SGLang wheels
  (``flags/sglang-<version>.json``, made by ``scripts/extract_sglang_flags.py``);
- :mod:`gpuhost.serve.profile` — launch profiles as YAML data (``profiles/*.yml`` plus the user's own);
- :mod:`gpuhost.serve.validate` — flags and known-bad combinations → :class:`~gpuhost.checks.Finding` list;
- :mod:`gpuhost.serve.command` — the exact argv and environment of a profile;
- :mod:`gpuhost.serve.logscan` — signatures of crashes in SGLang logs, incremental, and readiness phases.
"""

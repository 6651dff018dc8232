"""What the deployment tests share: where deploy/ is and the image's user. The tools they
run come through ``tests.tools`` (skipped locally when absent, required in CI)."""

from __future__ import annotations

from pathlib import Path

from tests.tools import require_module, require_tool  # noqa: F401  (re-exported for the deploy tests)

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
IMAGE_UID = 10001  # deploy/Dockerfile's USER, and the pods' runAsUser

"""The torch.compile cache records VLLM_API_KEY: preflight warns when other users can read it."""

from __future__ import annotations

from pathlib import Path

from launcher.host.compile_cache import check_compile_cache
from launcher.host.report import CheckStatus


def make_cache(root: Path, file_mode: int, dir_mode: int) -> Path:
    factors = root / "torch_compile_cache" / "ab12cd" / "rank_0_0" / "backbone" / "cache_key_factors.json"
    factors.parent.mkdir(parents=True)
    factors.write_text('{"env": {"VLLM_API_KEY": "..."}}')
    factors.chmod(file_mode)
    for directory in (factors.parent, *factors.parent.parents):
        directory.chmod(dir_mode)
        if directory == root:
            break
    return factors


def test_a_cache_others_can_read_is_a_warning_naming_the_fix(tmp_path: Path) -> None:
    root = tmp_path / "vllm-cache"
    factors = make_cache(root, 0o644, 0o755)  # as measured on the H200
    result = check_compile_cache({"VLLM_CACHE_ROOT": str(root)}, uses_key=True)
    assert result.status is CheckStatus.WARNING
    assert str(factors) in result.detail and result.hint and f"chmod -R go-rwx {root}" in result.hint


def test_a_private_cache_or_no_key_is_fine(tmp_path: Path) -> None:
    root = tmp_path / "vllm-cache"
    make_cache(root, 0o644, 0o700)  # nobody else can enter the directories
    assert check_compile_cache({"VLLM_CACHE_ROOT": str(root)}, uses_key=True).status is CheckStatus.OK
    assert check_compile_cache({"VLLM_CACHE_ROOT": str(root)}, uses_key=False).status is CheckStatus.SKIPPED


def test_the_cache_root_follows_xdg_when_vllm_cache_root_is_unset(tmp_path: Path) -> None:
    make_cache(tmp_path / "vllm", 0o640, 0o750)
    assert check_compile_cache({"XDG_CACHE_HOME": str(tmp_path)}, uses_key=True).status is CheckStatus.WARNING

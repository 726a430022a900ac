"""llama.cpp's binding is installed only on request (`headprune prepare --runtime llama-cpp`): a missing
binding names that command, and a failed or interrupted build leaves no half-installed folder."""
import subprocess
import sys
import types

import pytest

from pruning_core.cli.main import main
from pruning_core.core.errors import HeadpruneError
from pruning_core.bench.export import llama_cpp


@pytest.fixture
def no_binding(monkeypatch, headprune_home):
    """No llama_cpp importable from the environment (whatever this machine has)."""
    real = llama_cpp.importlib.import_module

    def fake(name, *a, **k):
        if name == "llama_cpp" and str(llama_cpp.install_folder()) not in sys.path:
            raise ImportError(name)
        return real(name, *a, **k)
    monkeypatch.setattr(llama_cpp.importlib, "import_module", fake)
    return headprune_home


def test_a_missing_binding_names_the_install_command(no_binding):
    with pytest.raises(HeadpruneError, match="headprune prepare --runtime llama-cpp"):
        llama_cpp.import_llama_cpp()


def test_a_failed_build_leaves_nothing_behind(no_binding, monkeypatch):
    def failing_pip(cmd, **kwargs):
        target = cmd[cmd.index("--target") + 1]
        (llama_cpp.Path(target) / "llama_cpp").mkdir(parents=True)     # half a build
        return types.SimpleNamespace(returncode=1, stderr="CMake Error: no compiler")
    monkeypatch.setattr(llama_cpp.subprocess, "run", failing_pip)
    with pytest.raises(HeadpruneError, match="C\\+\\+ compiler.*no compiler"):
        llama_cpp.install()
    assert not llama_cpp.install_folder().exists()
    assert list(no_binding.iterdir()) == []            # the temporary build folder is gone too


def test_an_interrupted_build_leaves_nothing_behind(no_binding, monkeypatch):
    def slow_pip(cmd, **kwargs):
        raise subprocess.TimeoutExpired(cmd, kwargs.get("timeout"))
    monkeypatch.setattr(llama_cpp.subprocess, "run", slow_pip)
    with pytest.raises(HeadpruneError, match="ran past 5 s"):
        llama_cpp.install(timeout_s=5)
    assert list(no_binding.iterdir()) == []


def test_prepare_runtime_installs_into_the_home_and_is_then_found(no_binding, monkeypatch, capsys):
    calls = []

    def fake_pip(cmd, **kwargs):
        calls.append((cmd, kwargs["env"]["CMAKE_ARGS"]))
        package = llama_cpp.Path(cmd[cmd.index("--target") + 1]) / "llama_cpp"
        package.mkdir(parents=True)
        (package / "__init__.py").write_text("Llama = 'stand-in'\n")
        return types.SimpleNamespace(returncode=0, stderr="")
    monkeypatch.setattr(llama_cpp.subprocess, "run", fake_pip)
    monkeypatch.delitem(sys.modules, "llama_cpp", raising=False)
    assert main(["prepare", "--runtime", "llama-cpp"]) == 0
    assert f"llama-cpp-python=={llama_cpp.VERSION}" in calls[0][0] and "diskcache==5.6.3" in calls[0][0] and "LLAMA_BUILD_TESTS=OFF" in calls[0][1]
    assert "installed in" in capsys.readouterr().out
    try:
        assert llama_cpp.import_llama_cpp().Llama == "stand-in"
    finally:
        sys.modules.pop("llama_cpp", None)
        sys.path.remove(str(llama_cpp.install_folder()))
    assert main(["prepare", "--runtime", "llama-cpp"]) == 0      # already there: pip is not run again
    assert len(calls) == 1

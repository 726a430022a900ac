"""Third-party browser scripts (d3, jQuery) for the bertviz views, offline.

bertviz's views load require.js, d3 and jQuery from a CDN, which fails on an offline machine.
Here they come from ``assets/vendor/`` instead:

- at install time, :func:`fetch` (``python -m app.core.webassets``, run by ``make install``) downloads
  the exact versions pinned in ``assets/js.lock.json`` from the npm registry with ``npm pack``
  (the ordinary client; Node.js and npm are needed once, at install time), checks the tarball's sha512
  integrity and the file's sha256 against the lock file, and writes the minified script and its
  license into ``assets/vendor/`` (git-ignored: the repository carries no third-party code);
- at run time, :func:`script` reads a file back, checks its sha256 again, and the views inline it
  into their HTML. Nothing is fetched while the dashboard runs.
"""
from __future__ import annotations

import argparse
import base64
import functools
import hashlib
import io
import json
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

from pruning_core.core.errors import HeadpruneError
from pruning_core.core.io.storage import sha256_bytes, write_bytes

ASSETS = Path(__file__).resolve().parents[2] / "assets"
LOCK_FILE = ASSETS / "js.lock.json"
VENDOR = ASSETS / "vendor"
FETCH_COMMAND = ".venv/bin/python -m app.core.webassets"


class ScriptsMissing(HeadpruneError):
    """A pinned script is not in assets/vendor/ (or was altered): the install step did not run."""


@functools.cache
def lock() -> dict[str, dict]:
    """The pinned scripts: name -> {package, version, tarball, integrity, file, sha256, license, ...}."""
    return json.loads(LOCK_FILE.read_text(encoding="utf-8"))["scripts"]


def vendor_path(name: str) -> Path:
    return VENDOR / f"{name}.min.js"


@functools.cache
def script(name: str) -> str:
    """The text of pinned script ``name`` ("d3" | "jquery"), checked against its sha256.

    Raises:
        ScriptsMissing: not fetched yet, or the file differs from the pinned one.
    """
    entry = lock()[name]
    path = vendor_path(name)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise ScriptsMissing(
            f"The {name} script ({entry['package']} {entry['version']}) that the bertviz views need is not "
            f"installed in {path.parent}. Run `{FETCH_COMMAND}` once on a machine with network "
            "(`make install` does it).") from None
    if sha256_bytes(data) != entry["sha256"]:
        raise ScriptsMissing(f"{path} is not the pinned {entry['package']} {entry['version']} (sha256 differs). "
                             f"Run `{FETCH_COMMAND} --force` to fetch it again.")
    return data.decode("utf-8")


def missing() -> list[str]:
    """Names of the pinned scripts that are absent or altered (empty when all is in place)."""
    out = []
    for name in lock():
        try:
            script(name)
        except ScriptsMissing:
            out.append(name)
    return out


# -- inlining into HTML ----------------------------------------------------------------------------

def script_json(data) -> str:
    """JSON that is safe inside an HTML ``<script>`` element: ``<``, ``>``, ``&`` escaped as ``\\u003c`` etc.

    Without this a string such as ``</script><img src=x onerror=alert(1)>`` (a token typed by a
    user) would end the script element and inject markup; escaped, it is the same string to
    JavaScript and inert to the HTML parser. Non-ASCII (U+2028/9 included) is escaped too.
    """
    text = json.dumps(data, ensure_ascii=True, separators=(",", ":"), allow_nan=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def inline_script(code: str) -> str:
    """``code`` as an inline ``<script>`` element; a ``</script`` inside it is escaped as ``<\\/script``."""
    return "<script>\n" + re.sub(r"</(script)", r"<\\/\1", code, flags=re.I) + "\n</script>\n"


# -- install time ----------------------------------------------------------------------------------

def _download_tarball(entry: dict, workdir: Path) -> bytes:
    """The package tarball, by `npm pack PACKAGE@VERSION` (the registry's ordinary client)."""
    spec = f"{entry['package']}@{entry['version']}"
    npm = shutil.which("npm")
    if not npm:
        raise HeadpruneError(f"npm is needed once to fetch {spec} for the attention views; install Node.js "
                             "and npm (Debian: apt-get install npm), then run `python -m app.core.webassets`.")
    done = subprocess.run([npm, "pack", spec, "--pack-destination", str(workdir), "--json", "--silent"],
                          capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        raise HeadpruneError(f"`npm pack {spec}` failed: {done.stderr.strip()[:300]}")
    filename = json.loads(done.stdout)[0]["filename"]
    return (workdir / filename).read_bytes()


def _check_integrity(data: bytes, integrity: str, what: str) -> None:
    algo, _, expected = integrity.partition("-")
    got = base64.b64encode(hashlib.new(algo, data).digest()).decode()
    if got != expected:
        raise HeadpruneError(f"{what}: the downloaded tarball's {algo} is {got}, the lock file pins {expected}. "
                             "Refusing to install it.")


def _member(tar: tarfile.TarFile, name: str) -> bytes:
    f = tar.extractfile(name)
    if f is None:
        raise HeadpruneError(f"{name} is missing from the package tarball.")
    return f.read()


def fetch(force: bool = False) -> list[Path]:
    """Download every pinned script that is missing (or all, with ``force``); returns the files written."""
    VENDOR.mkdir(parents=True, exist_ok=True)
    written = []
    for name, entry in lock().items():
        if not force and name not in missing():
            continue
        what = f"{entry['package']} {entry['version']}"
        with tempfile.TemporaryDirectory() as tmp:
            tarball = _download_tarball(entry, Path(tmp))
        _check_integrity(tarball, entry["integrity"], what)
        with tarfile.open(fileobj=io.BytesIO(tarball), mode="r:gz") as tar:
            code = _member(tar, entry["file"])
            license_text = _member(tar, entry["license_file"])
        if sha256_bytes(code) != entry["sha256"]:
            raise HeadpruneError(f"{what}: {entry['file']} does not match the pinned sha256.")
        write_bytes(vendor_path(name), code, mode=0o644)      # the dashboard may run as another user
        write_bytes(VENDOR / f"{name}.LICENSE.txt", license_text, mode=0o644)
        written.append(vendor_path(name))
        script.cache_clear()
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Fetch the pinned d3 and jQuery scripts for the bertviz views "
                                                 "into assets/vendor/ (needs network once).")
    parser.add_argument("--force", action="store_true", help="fetch again even if the files are in place")
    parser.add_argument("--check", action="store_true", help="only report whether the files are in place")
    args = parser.parse_args(argv)
    if args.check:
        absent = missing()
        print("all scripts in place" if not absent else f"missing or altered: {', '.join(absent)}")
        return 1 if absent else 0
    try:
        written = fetch(force=args.force)
    except (HeadpruneError, OSError, subprocess.SubprocessError) as exc:
        print(f"error: could not fetch the bertviz scripts: {exc}", file=sys.stderr)
        return 1
    for path in written:
        print(f"wrote {path}")
    if not written:
        print(f"scripts already in place in {VENDOR}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Shared code of scripts/programs/{build,run,record}: where the sources come from and how each
program is built and run. See scripts/programs/README.md."""
import hashlib, os, shlex, subprocess, sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
CACHE = Path(os.environ.get("PROFGEN_PROGRAMS_CACHE",
                            Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "profgen" / "programs"))
CC = os.environ.get("CC_PROFGEN", "clang-19")

# The crates that carry the sources, pinned: the sources are never committed, cargo fetches them.
CRATES = {"lua-src": "548.1.2", "libsqlite3-sys": "0.35.0"}

# -fdebug-compilation-dir=.: the same binary whatever folder the build runs from.
COMMON_CFLAGS = ["-O2", "-fno-omit-frame-pointer", "-mno-omit-leaf-frame-pointer",
                 "-ffunction-sections", "-fdata-sections", "-fdebug-compilation-dir=."]
VARIANTS = {
    "dwarf": ["-gdwarf-4", "-fdebug-info-for-profiling"],
    "probe": ["-gdwarf-4", "-fpseudo-probe-for-profiling"],
}
LDFLAGS = ["-fuse-ld=lld", "-Wl,--build-id=sha1"]


def die(msg):
    sys.exit(f"{Path(sys.argv[0]).name}: {msg}")


def vendor_dir():
    """Fetches the pinned crates with cargo (once) into CACHE/vendor and returns that folder."""
    vendor = CACHE / "vendor"
    stamp = vendor / ".profgen-crates"
    want = " ".join(f"{k}={v}" for k, v in sorted(CRATES.items()))
    if stamp.exists() and stamp.read_text() == want:
        return vendor
    proj = CACHE / "cargo-project"
    (proj / "src").mkdir(parents=True, exist_ok=True)
    deps = "\n".join(f'{k} = "={v}"' for k, v in CRATES.items())
    (proj / "Cargo.toml").write_text(
        f'[package]\nname = "profgen-programs"\nversion = "0.0.0"\nedition = "2021"\n\n[dependencies]\n{deps}\n')
    (proj / "src" / "lib.rs").write_text("")
    print(f"fetching {want} with cargo into {vendor}", file=sys.stderr)
    subprocess.run(["cargo", "vendor", "--quiet", "--versioned-dirs", str(vendor)], cwd=proj, check=True,
                   stdout=subprocess.DEVNULL)
    stamp.write_text(want)
    return vendor


class Program:
    """One program: its C sources (upstream ones from the crate plus our driver), include dirs,
    defines, libraries and how to run its benchmark."""

    def __init__(self, name, exe, sources, includes, defines, libs, default_size, record_size):
        self.name, self.exe, self.sources = name, exe, sources
        self.includes, self.defines, self.libs = includes, defines, libs
        # default_size: a timed run of ~0.2-0.3 s natively; record_size: 100-250M instructions.
        self.default_size, self.record_size = default_size, record_size


def program(name):
    vendor = vendor_dir()
    if name == "lua":
        src = vendor / f"lua-src-{CRATES['lua-src']}" / "lua-5.4.8"
        sources = sorted(p for p in src.glob("*.c") if p.name not in ("lua.c", "luac.c", "onelua.c"))
        # Lua seeds its string hashes from time() and addresses (luai_makeseed): a fixed seed
        # makes the work, and so the instruction count, the same from run to run.
        return Program("lua", "lua", sources + [HERE / "lua" / "main.c"], [src],
                       ["-DLUA_USE_LINUX", "-Dluai_makeseed(L)=0x2545f491u"],
                       ["-lm", "-ldl"], 30, 2)
    if name == "sqlite":
        src = vendor / f"libsqlite3-sys-{CRATES['libsqlite3-sys']}" / "sqlite3"
        # The defines libsqlite3-sys builds its bundled SQLite with (minus the ones for Rust only).
        defines = ["-DSQLITE_THREADSAFE=0", "-DSQLITE_DEFAULT_MEMSTATUS=0", "-DSQLITE_OMIT_LOAD_EXTENSION",
                   "-DSQLITE_ENABLE_FTS5", "-DSQLITE_ENABLE_RTREE", "-DSQLITE_ENABLE_STAT4",
                   "-DSQLITE_ENABLE_COLUMN_METADATA", "-DSQLITE_ENABLE_MATH_FUNCTIONS", "-DHAVE_USLEEP=1"]
        return Program("sqlite", "sqlite-bench", [src / "sqlite3.c", HERE / "sqlite" / "bench.c"], [src],
                       defines, ["-lm"], 30, 1)
    die(f"unknown program {name!r} (known: lua, sqlite)")


def run_command(prog, exe, size):
    """The benchmark command line: deterministic output, work proportional to size."""
    if prog.name == "lua":
        return [str(exe), str(HERE / "lua" / "bench.lua"), str(size)]
    return [str(exe), str(size)]


def build(prog, variant, out, profile=None, cflags=(), ldflags=(), exe=None, jobs=None, quiet=False):
    """Compiles (objects cached by their flags in OUT/obj-HASH) and links; returns the binary."""
    if variant not in VARIANTS:
        die(f"unknown variant {variant!r} (known: {', '.join(VARIANTS)})")
    out = Path(out).resolve()
    flags = COMMON_CFLAGS + VARIANTS[variant] + list(cflags) + prog.defines + [f"-I{d}" for d in prog.includes]
    key = hashlib.sha256(" ".join([CC] + flags).encode())
    if profile:
        profile = Path(profile).resolve()
        if not profile.is_file():
            die(f"--profile {profile}: no such file")
        flags.append(f"-fprofile-sample-use={profile}")
        key.update(profile.read_bytes())
    objdir = out / f"obj-{key.hexdigest()[:12]}"
    objdir.mkdir(parents=True, exist_ok=True)
    (objdir / "flags").write_text(shlex.join([CC] + flags) + "\n")

    def compile_one(src):
        obj = objdir / (src.stem + ".o")
        if obj.exists() and obj.stat().st_mtime >= src.stat().st_mtime:
            return obj
        tmp = obj.with_suffix(".o.tmp")
        r = subprocess.run([CC, *flags, "-c", str(src), "-o", str(tmp)], capture_output=True, text=True)
        if r.returncode != 0:
            die(f"compiling {src} failed:\n{r.stderr}")
        os.replace(tmp, obj)
        return obj

    with ThreadPoolExecutor(jobs or os.cpu_count() or 1) as pool:
        objs = list(pool.map(compile_one, prog.sources))
    exe = Path(exe).resolve() if exe else out / prog.exe
    cmd = [CC, *LDFLAGS, *ldflags, *map(str, objs), *prog.libs, "-o", str(exe) + ".tmp"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        die(f"linking {exe} failed:\n{shlex.join(cmd)}\n{r.stderr}")
    os.replace(str(exe) + ".tmp", exe)
    if not quiet:
        print(f"built {exe}", file=sys.stderr)
    return exe

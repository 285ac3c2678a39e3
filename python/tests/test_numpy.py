"""The NumPy API against the f64 reference, the golden vectors and its own error contract.

Run with ``python -m unittest discover -s python/tests`` after ``pip install ./python``, or
through ``cargo test -p macko-python`` (python/tests/python_suite.rs). Every device present is tested:
the CPU always, wgpu (lavapipe in CI) and CUDA where they open; ``MACKO_REQUIRE_BACKENDS`` (as
in the Rust tests) turns a missing one into a failure.
"""

import os
import pathlib
import tempfile
import threading
import unittest

import numpy as np

import macko

ROOT = pathlib.Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "fixtures" / "macko-reference"


def required(kind):
    names = os.environ.get("MACKO_REQUIRE_BACKENDS", "")
    return kind in [n.strip().lower() for n in names.split(",")]


def devices():
    """(kind, Device) for every backend that opens here."""
    found = []
    for kind in ("cpu", "wgpu", "cuda"):
        try:
            found.append((kind, macko.Device(kind)))
        except macko.UnavailableError as e:
            if required(kind):
                raise AssertionError(f"{kind} is required but unavailable: {e}") from e
    return found


DEVICES = devices()


def random_weights(rows, cols, seed, density=1.0):
    rng = np.random.default_rng(seed)
    w = rng.uniform(-2, 2, size=(rows, cols)).astype(np.float16)
    w[rng.random((rows, cols)) >= density] = 0
    return w


def random_x(shape, seed):
    return np.random.default_rng(seed ^ 0x5EED).uniform(-1, 1, size=shape).astype(np.float16)


def assert_agrees(test, what, matrix, x, y):
    """y (from a device) within binary16/f32 rounding of the f64 reference, per row: the bound
    is a few units of the output's precision on the row's sum of |a·x| terms."""
    ref = matrix.reference(x)
    dense = matrix.to_dense().astype(np.float64)
    # Non-finite x elements meet only zero weights in these tests, and 0 · x adds nothing.
    xs = np.nan_to_num(np.abs(x.astype(np.float64)), nan=0.0, posinf=0.0)
    abs_sum = xs @ np.abs(dense).T if x.ndim == 2 else np.abs(dense) @ xs
    eps = 2.0**-10 if y.dtype == np.float16 else 2.0**-20
    bound = 4 * eps * abs_sum + 4 * eps * np.abs(ref) + 1e-6
    err = np.abs(y.astype(np.float64) - ref)
    bad = np.argwhere(~(err <= bound))
    test.assertEqual(
        len(bad), 0, f"{what}: {len(bad)} elements off, first {bad[:3].tolist()}"
    )


class Encoding(unittest.TestCase):
    def test_golden_vectors_bit_for_bit(self):
        cases = sorted(GOLDEN.glob("case*.dense.f16"))
        self.assertGreater(len(cases), 10, f"golden vectors missing under {GOLDEN}")
        for dense_file in cases:
            name = dense_file.name.split(".")[0]
            manifest = {
                line.split()[0]: line.split()
                for line in (GOLDEN / "manifest.tsv").read_text().splitlines()
                if line and not line.startswith("#")
            }
            rows, cols = int(manifest[name][1]), int(manifest[name][2])
            dense = np.fromfile(dense_file, dtype="<f2").reshape(rows, cols)
            parts = macko.Matrix.from_dense(dense).parts()
            want_rows = np.fromfile(GOLDEN / f"{name}.rowptr.i32", dtype="<i4")
            want_values = np.fromfile(GOLDEN / f"{name}.values.f16", dtype="<u2")
            want_codes = np.fromfile(GOLDEN / f"{name}.deltas.u8", dtype=np.uint8)
            np.testing.assert_array_equal(parts["row_ptr"].astype(np.int64), want_rows, name)
            np.testing.assert_array_equal(parts["values"].view(np.uint16), want_values, name)
            np.testing.assert_array_equal(parts["codes"], want_codes, name)

    def test_pruning_keeps_the_largest_per_row_and_decodes_back(self):
        w = random_weights(64, 200, seed=1)
        m = macko.Matrix.from_dense(w, density=0.25)
        back = m.to_dense()
        self.assertEqual(back.dtype, np.float16)
        kept = (back != 0).sum(axis=1)
        self.assertTrue((kept == 50).all(), kept)
        for r in range(64):
            smallest_kept = np.abs(back[r][back[r] != 0]).min()
            largest_dropped = np.abs(w[r][back[r] == 0]).max()
            self.assertGreaterEqual(smallest_kept, largest_dropped)
        np.testing.assert_array_equal(back[back != 0], w[back != 0])

    def test_formats_and_storage(self):
        w = random_weights(256, 512, seed=2, density=0.5)
        macko_m = macko.Matrix.from_dense(w)
        csr = macko.Matrix.from_dense(w, format="csr")
        dense = macko.Matrix.from_dense(w, format="dense")
        self.assertEqual([m.format for m in (macko_m, csr, dense)], ["macko", "csr", "dense"])
        for m in (macko_m, csr, dense):
            self.assertEqual(m.shape, (256, 512))
            np.testing.assert_array_equal(m.to_dense(), w)
        ratio = macko_m.nbytes / dense.nbytes
        self.assertTrue(0.6 < ratio < 0.7, ratio)
        self.assertGreater(csr.nbytes, dense.nbytes)

    def test_sparse24_keeps_two_of_every_four(self):
        w = random_weights(12, 22, seed=14)
        m = macko.Matrix.from_dense(w, format="sparse24")
        self.assertEqual(m.format, "sparse24")
        back = m.to_dense()
        padded = np.zeros((12, 24), np.float16)
        padded[:, :22] = back
        groups = padded.reshape(12, 6, 4)
        self.assertTrue(((groups != 0).sum(axis=2) <= 2).all())
        for r in range(12):
            for g in range(6):
                kept = np.abs(groups[r, g][groups[r, g] != 0])
                cols = range(4 * g, min(4 * g + 4, 22))
                dropped = [abs(w[r, c]) for c in cols if back[r, c] == 0]
                if kept.size and dropped:
                    self.assertGreaterEqual(kept.min(), max(dropped))
        self.assertEqual(macko.Matrix.from_dense(back, format="sparse24"), m)
        self.assertAlmostEqual(m.nbytes / (12 * 24 * 2), 0.5625)
        for kw in ({"density": 0.5}, {"quantize": "int8"}):
            with self.assertRaises(macko.ConfigError):
                macko.Matrix.from_dense(w, format="sparse24", **kw)

    def test_float32_is_rounded_and_out_of_range_refused(self):
        w = random_weights(8, 16, seed=3).astype(np.float32) + np.float32(1e-4)
        m = macko.Matrix.from_dense(w, format="dense")
        np.testing.assert_array_equal(m.to_dense(), w.astype(np.float16))
        w[3, 5] = 1e6
        with self.assertRaises(macko.FormatError) as caught:
            macko.Matrix.from_dense(w)
        self.assertIn("[3, 5]", str(caught.exception))

    def test_from_macko_parts_validates(self):
        m = macko.Matrix.from_dense(random_weights(10, 40, seed=4, density=0.3))
        p = m.parts()
        again = macko.Matrix.from_macko_parts(10, 40, p["row_ptr"], p["values"], p["codes"])
        self.assertEqual(again, m)
        bad = p["row_ptr"].copy()
        bad[3] = bad[4] + 1
        with self.assertRaises(macko.FormatError):
            macko.Matrix.from_macko_parts(10, 40, bad, p["values"], p["codes"])

    def test_save_and_load(self):
        a = macko.Matrix.from_dense(random_weights(30, 70, seed=5, density=0.4))
        b = macko.Matrix.from_dense(random_weights(20, 10, seed=6), format="csr")
        q = macko.Matrix.from_dense(random_weights(16, 64, seed=7), quantize="int4", group=32)
        with tempfile.TemporaryDirectory() as d:
            path = pathlib.Path(d) / "m.safetensors"
            macko.save(path, {"a": a, "b": b, "q": q})
            loaded = macko.load(str(path))
            self.assertEqual(sorted(loaded), ["a", "b", "q"])
            self.assertEqual(loaded["a"], a)
            self.assertEqual(loaded["b"], b)
            self.assertEqual(loaded["q"], q)
            a.save(path, name="w")
            self.assertEqual(macko.load(path)["w"], a)
            data = bytearray(path.read_bytes())
            data[-3] ^= 0xFF
            path.write_bytes(bytes(data))
            with self.assertRaises(macko.FormatError):
                macko.load(path)
            with self.assertRaises(macko.FormatError):
                macko.load(pathlib.Path(d) / "missing.safetensors")

    def test_bytes_and_pickle_round_trip(self):
        import pickle

        for m in (
            macko.Matrix.from_dense(random_weights(30, 70, seed=8, density=0.4)),
            macko.Matrix.from_dense(random_weights(16, 64, seed=9), quantize="int8"),
            macko.Matrix.from_dense(random_weights(12, 10, seed=10), format="sparse24"),
        ):
            with self.subTest(format=m.format):
                self.assertEqual(macko.Matrix.from_bytes(m.to_bytes()), m)
                self.assertEqual(pickle.loads(pickle.dumps(m)), m)
        data = bytearray(m.to_bytes())
        data[-1] ^= 0x01
        for bad in (b"", b"12345678", bytes(data)):
            with self.assertRaises(macko.FormatError):
                macko.Matrix.from_bytes(bad)


class Errors(unittest.TestCase):
    def test_bad_arguments_raise_typed_errors(self):
        w = random_weights(4, 8, seed=8)
        a = macko.Device("cpu").upload(macko.Matrix.from_dense(w))
        cases = [
            (macko.DtypeError, lambda: macko.Matrix.from_dense([[1.0, 2.0]])),
            (macko.DtypeError, lambda: macko.Matrix.from_dense(w.astype(np.int32))),
            (macko.ShapeError, lambda: macko.Matrix.from_dense(np.ones(8, np.float16))),
            (macko.ShapeError, lambda: macko.Matrix.from_dense(np.ones((2, 2, 2), np.float16))),
            (macko.ConfigError, lambda: macko.Matrix.from_dense(w, format="coo")),
            (macko.ConfigError, lambda: macko.Matrix.from_dense(w, density=0.0)),
            (macko.ConfigError, lambda: macko.Matrix.from_dense(w, density=1.5)),
            (macko.ConfigError, lambda: macko.Matrix.from_dense(w, group=64)),
            (macko.ConfigError, lambda: macko.Matrix.from_dense(w, quantize="int3")),
            (macko.ConfigError, lambda: macko.Matrix.from_dense(w, quantize="int8", group=7)),
            (macko.ConfigError, lambda: macko.Matrix.from_dense(w, format="csr", quantize="int8")),
            (macko.ConfigError, lambda: macko.Device("tpu")),
            (macko.ShapeError, lambda: a @ np.ones(7, np.float16)),
            (macko.ShapeError, lambda: a @ np.ones((0, 8), np.float16)),
            (macko.ShapeError, lambda: a @ np.ones((2, 2, 8), np.float16)),
            (macko.DtypeError, lambda: a @ np.ones(8, np.float64)),
            (macko.DtypeError, lambda: a @ [1.0] * 8),
            (macko.ConfigError, lambda: a.multiply(np.ones(8, np.float16), out_dtype="int8")),
        ]
        for i, (cls, call) in enumerate(cases):
            with self.subTest(case=i):
                with self.assertRaises(cls) as caught:
                    call()
                self.assertIsInstance(caught.exception, macko.MackoError)
                self.assertTrue(str(caught.exception))

    def test_errors_are_also_builtin_classes(self):
        self.assertTrue(issubclass(macko.ShapeError, ValueError))
        self.assertTrue(issubclass(macko.DtypeError, TypeError))
        self.assertTrue(issubclass(macko.OutOfMemoryError, MemoryError))
        self.assertTrue(issubclass(macko.UnavailableError, RuntimeError))

    def test_the_plan_cache_status_says_why_it_is_not_read(self):
        # The CPU has no plans to tune, whatever the cache holds.
        self.assertIn("no plans to tune", macko.Device("cpu").plan_cache)

    def test_available_lists_every_backend(self):
        listed = macko.available()
        self.assertEqual(sorted(s["backend"] for s in listed), ["cpu", "cuda", "wgpu"])
        for s in listed:
            self.assertIn("name" if s["available"] else "reason", s)


class Products(unittest.TestCase):
    def test_every_format_on_every_device(self):
        self.assertTrue(DEVICES)
        w = random_weights(203, 301, seed=9, density=0.4)
        x = random_x(301, 9)
        matrices = [
            macko.Matrix.from_dense(w),
            macko.Matrix.from_dense(w, format="csr"),
            macko.Matrix.from_dense(w, format="dense"),
            macko.Matrix.from_dense(w, quantize="int8"),
            macko.Matrix.from_dense(w, format="dense", quantize="int4", group=64),
            macko.Matrix.from_dense(w, format="sparse24"),
        ]
        for kind, dev in DEVICES:
            for m in matrices:
                a = dev.upload(m)  # every backend multiplies every one of these formats
                for out in ("float32", "float16"):
                    with self.subTest(device=kind, format=m.format, out=out):
                        y = a.multiply(x, out_dtype=out)
                        self.assertEqual(y.shape, (203,))
                        self.assertEqual(y.dtype, np.dtype(out))
                        assert_agrees(self, f"{kind} {m.format}", m, x, y)

    def test_batches_of_every_size(self):
        w = random_weights(97, 150, seed=10, density=0.5)
        m = macko.Matrix.from_dense(w)
        for kind, dev in DEVICES:
            a = dev.upload(m)
            for b in (1, 2, 3, 5, 8, 13, 16, 17):
                with self.subTest(device=kind, batch=b):
                    x = random_x((b, 150), b)
                    y = a @ x
                    self.assertEqual(y.shape, (b, 97))
                    assert_agrees(self, f"{kind} B={b}", m, x, y)

    def test_padding_never_meets_nan_or_inf(self):
        w = random_weights(40, 200, seed=11, density=0.3)
        w[:, 20:60] = 0  # a run of 40 zero columns: padding entries fall inside it
        m = macko.Matrix.from_dense(w)
        x = random_x(200, 11)
        x[20:60:3] = np.nan
        x[21:60:3] = np.inf
        x[22:60:3] = -np.inf
        for kind, dev in DEVICES:
            with self.subTest(device=kind):
                y = dev.upload(m) @ x
                self.assertTrue(np.isfinite(y).all(), f"{kind}: padding read a non-finite x")
                assert_agrees(self, kind, m, x, y)

    def test_float32_vectors_and_dense_arrays_upload(self):
        w = random_weights(16, 24, seed=12)
        x32 = np.random.default_rng(12).uniform(-1, 1, 24).astype(np.float32)
        dev = macko.Device("cpu")
        y = dev.upload(w) @ x32
        m = macko.Matrix.from_dense(w, format="dense")
        assert_agrees(self, "cpu float32 x", m, x32.astype(np.float16), y)

    def test_threads_share_a_device(self):
        w = random_weights(300, 500, seed=13, density=0.5)
        m = macko.Matrix.from_dense(w)
        for kind, dev in DEVICES:
            a = dev.upload(m)
            xs = [random_x(500, s) for s in range(4)]
            alone = [a @ x for x in xs]
            results = [[] for _ in xs]

            def work(i):
                for _ in range(10):
                    results[i].append(a @ xs[i])

            threads = [threading.Thread(target=work, args=(i,)) for i in range(len(xs))]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            for i, got in enumerate(results):
                self.assertEqual(len(got), 10)
                for y in got:
                    np.testing.assert_array_equal(y, alone[i], f"{kind}, thread {i}")


if __name__ == "__main__":
    unittest.main()

"""macko.compat, the drop-in for the reference's ``macko_spmv``: bit-exact compression against
the golden vectors (the reference encoder's output), products against the f64 reference on
every device torch and macko share, the op under vmap, opcheck, torch.compile and CUDA graphs,
the upload cache, and the refusals.

Skipped where torch is not installed; CUDA cases run where torch sees a GPU macko can open
(``MACKO_REQUIRE_BACKENDS`` naming cuda makes a missing one a failure).
"""

import gc
import os
import pathlib
import sys
import unittest

import numpy as np

try:
    import torch
except ImportError:  # pragma: no cover - CI has no torch
    torch = None

if torch is not None:
    import macko.compat as mc
    import macko.torch as mt

import macko

ROOT = pathlib.Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "fixtures" / "macko-reference"


def required(kind):
    names = os.environ.get("MACKO_REQUIRE_BACKENDS", "")
    return kind in [n.strip().lower() for n in names.split(",")]


def torch_devices():
    """"cpu", and "cuda" where torch and macko both reach a GPU."""
    if torch is None:
        return []
    found = ["cpu"]
    if torch.cuda.is_available():
        try:
            mt.device_for("cuda")
            found.append("cuda")
        except macko.UnavailableError:
            if required("cuda"):
                raise
    elif required("cuda"):
        raise AssertionError("cuda is required but torch sees no CUDA device")
    return found


DEVICES = torch_devices()


def golden_cases():
    """(name, rows, cols, dense, values, deltas, row_indices) for every golden case."""
    for line in (GOLDEN / "manifest.tsv").read_text().splitlines():
        if not line.strip() or line.startswith("#") or line.startswith("name"):
            continue
        name, rows, cols = line.split("\t")[:3]
        rows, cols = int(rows), int(cols)

        def read(ext, dtype):
            return np.fromfile(GOLDEN / f"{name}.{ext}", dtype=dtype)

        dense = read("dense.f16", "<f2").reshape(rows, cols)
        yield (
            name,
            rows,
            cols,
            dense,
            read("values.f16", "<u2"),
            read("deltas.u8", "u1"),
            read("rowptr.i32", "<i4"),
        )


def random_sparse(rows, cols, density, seed):
    g = torch.Generator().manual_seed(seed)
    m = torch.rand((rows, cols), generator=g, dtype=torch.float32) * 2 - 1
    m[torch.rand((rows, cols), generator=g) > density] = 0
    return m.to(torch.float16)


def assert_product(test, y, dense, v, what):
    """y (float16, rows) against dense·v summed in float64."""
    test.assertEqual(y.dtype, torch.float16, what)
    test.assertEqual(tuple(y.shape), (dense.shape[0],), what)
    want = dense.double().cpu() @ v.reshape(-1).double().cpu()
    scale = want.abs().max().item() + 1.0
    err = (y.double().cpu() - want).abs().max().item()
    # float16 output: half an ulp of the largest entry, plus f32 summation.
    test.assertLess(err, 2e-3 * scale, f"{what}: max error {err} against scale {scale}")


@unittest.skipIf(torch is None, "torch is not installed")
class Compress(unittest.TestCase):
    def test_compress_is_bit_exact_with_the_golden_vectors(self):
        cases = list(golden_cases())
        self.assertGreaterEqual(len(cases), 10)
        for device in DEVICES:
            for name, rows, cols, dense, values, deltas, row_indices in cases:
                with self.subTest(device=device, case=name):
                    m = torch.from_numpy(dense.copy()).to(device)
                    c = mc.compress(m)
                    self.assertEqual(len(c), 5)
                    self.assertEqual((c[3], c[4]), (rows, cols))
                    self.assertIsInstance(c[3], int)
                    self.assertEqual(c[0].dtype, torch.float16)
                    self.assertEqual(c[1].dtype, torch.uint8)
                    self.assertEqual(c[2].dtype, torch.int32)
                    for t in c[:3]:
                        self.assertEqual(t.device.type, device)
                    got_values = c[0].cpu().numpy().view("<u2")
                    np.testing.assert_array_equal(got_values, values)
                    np.testing.assert_array_equal(c[1].cpu().numpy(), deltas)
                    np.testing.assert_array_equal(c[2].cpu().numpy(), row_indices)

    def test_move_to_device_keeps_the_arrays(self):
        c = mc.compress(random_sparse(9, 40, 0.4, seed=1))
        moved = mc.move_to_device(c, "cpu")
        for a, b in zip(c[:3], moved[:3]):
            self.assertTrue(torch.equal(a, b))
        self.assertEqual(moved[3:], c[3:])

    def test_bad_matrices_are_refused(self):
        cases = [
            (macko.DtypeError, lambda: mc.compress(torch.ones(4, 8))),
            (macko.DtypeError, lambda: mc.compress(np.ones((4, 8), np.float16))),
            (macko.ShapeError, lambda: mc.compress(torch.ones(8, dtype=torch.float16))),
            (macko.ShapeError, lambda: mc.compress(torch.ones(8, 4, dtype=torch.float16).T)),
            (macko.ShapeError, lambda: mc.compress(torch.ones(2, 4, 8, dtype=torch.float16))),
            (macko.DtypeError, lambda: mc.move_to_device((1, 2, 3), "cpu")),
        ]
        for i, (cls, call) in enumerate(cases):
            with self.subTest(case=i):
                with self.assertRaises(cls):
                    call()


@unittest.skipIf(torch is None, "torch is not installed")
class Multiply(unittest.TestCase):
    def test_products_match_the_reference_on_every_device(self):
        shapes = [(1, 1, 1.0), (5, 32, 0.3), (33, 100, 0.0), (64, 1000, 0.5), (300, 257, 0.1)]
        for device in DEVICES:
            for i, (rows, cols, d) in enumerate(shapes):
                with self.subTest(device=device, shape=(rows, cols, d)):
                    dense = random_sparse(rows, cols, d, seed=10 + i).to(device)
                    c = mc.compress(dense)
                    v = (torch.rand(cols, dtype=torch.float32) * 2 - 1).half().to(device)
                    y = mc.multiply(c, v)
                    self.assertEqual(y.device.type, device)
                    assert_product(self, y, dense, v, f"{device} {rows}x{cols} d={d}")
                    # The op itself, and V as [1][cols] (the reference reads V flat).
                    y2 = torch.ops.macko_spmv.multiply(*c, v.reshape(1, cols))
                    self.assertTrue(torch.equal(y, y2))

    def test_padding_never_meets_nan_in_v(self):
        # A gap of 20 zeros forces a padding entry; V's NaN/∞ sit where only zeros are stored.
        dense = torch.zeros(3, 48, dtype=torch.float16)
        dense[0, 0] = 1.5
        dense[0, 21] = -2.0
        dense[2, 47] = 0.25
        for device in DEVICES:
            with self.subTest(device=device):
                c = mc.compress(dense.to(device))
                v = torch.ones(48, dtype=torch.float16)
                v[1:21] = float("nan")
                v[22:47] = float("inf")
                y = mc.multiply(c, v.to(device)).cpu()
                self.assertEqual(y.tolist(), [-0.5, 0.0, 0.25])

    def test_a_program_for_the_reference_runs_unchanged(self):
        saved = sys.modules.get("macko_spmv")
        sys.modules["macko_spmv"] = mc
        try:
            import macko_spmv

            for device in DEVICES:
                m = random_sparse(64, 96, 0.5, seed=3).to(device)
                compressed = macko_spmv.compress(m)
                v = torch.rand((96,), dtype=torch.float16, device=device)
                result = macko_spmv.multiply(compressed, v)
                expected_result = (m.float() @ v.float()).half()
                self.assertTrue(torch.allclose(expected_result, result, rtol=1e-3, atol=1e-3))
        finally:
            if saved is None:
                del sys.modules["macko_spmv"]
            else:
                sys.modules["macko_spmv"] = saved

    def test_vmap_over_v_is_one_few_token_product(self):
        dense = random_sparse(70, 130, 0.4, seed=4)
        for device in DEVICES:
            with self.subTest(device=device):
                c = mc.compress(dense.to(device))
                f = lambda x: mc.multiply(c, x)  # noqa: E731
                X = (torch.rand(7, 130) * 2 - 1).half().to(device)
                Y = torch.vmap(f)(X)
                self.assertEqual(tuple(Y.shape), (7, 70))
                for b in range(7):
                    # The few-token product may sum in another order than the single one.
                    assert_product(self, Y[b], dense, X[b], f"{device} vector {b}")
                # The reference's decoding layer: vmap over tokens of [batch, seq, hidden].
                X3 = X.reshape(1, 7, 130)
                Y3 = torch.vmap(f, in_dims=-2, out_dims=-2)(X3)
                self.assertTrue(torch.equal(Y3.reshape(7, 70), Y))
                # A vmap over nothing batched in V stays the single product.
                self.assertTrue(torch.equal(torch.vmap(lambda _: f(X[0]))(X), f(X[0]).expand(7, 70)))

    def test_opcheck(self):
        for device in DEVICES:
            with self.subTest(device=device):
                c = mc.compress(random_sparse(40, 64, 0.5, seed=5).to(device))
                v = torch.rand(64, dtype=torch.float16, device=device)
                torch.library.opcheck(torch.ops.macko_spmv.multiply, (*c, v))

    def test_in_place_changes_are_seen_and_dead_arrays_forgotten(self):
        for device in DEVICES:
            with self.subTest(device=device):
                before = len(mc._uploads)
                dense = random_sparse(20, 50, 0.5, seed=6).to(device)
                c = mc.compress(dense)
                v = torch.rand(50, dtype=torch.float16, device=device)
                y1 = mc.multiply(c, v)
                self.assertEqual(len(mc._uploads), before + 1)
                mc.multiply(c, v)
                self.assertEqual(len(mc._uploads), before + 1, "the second product re-uploaded")
                c[0].mul_(2)  # every stored value doubled, in place
                y2 = mc.multiply(c, v)
                assert_product(self, y2, dense.double() * 2, v, f"{device} after mul_")
                self.assertFalse(torch.equal(y1, y2))
                del c
                gc.collect()
                self.assertEqual(len(mc._uploads), before, "a dead matrix's copy was kept")

    def test_bad_arrays_and_vectors_are_refused(self):
        c = mc.compress(random_sparse(6, 40, 0.5, seed=7))
        v = torch.ones(40, dtype=torch.float16)
        values, deltas, rows_ix, rows, cols = c
        broken_ptr = rows_ix.clone()
        broken_ptr[-1] += 8
        negative_ptr = rows_ix.clone()
        negative_ptr[1] = -3
        cases = [
            (macko.DtypeError, lambda: mc.multiply(c, torch.ones(40))),
            (macko.ShapeError, lambda: mc.multiply(c, torch.ones(41, dtype=torch.float16))),
            (macko.ShapeError, lambda: mc.multiply(c, torch.ones(80, dtype=torch.float16)[::2])),
            (macko.DtypeError, lambda: mc.multiply((values.float(), deltas, rows_ix, rows, cols), v)),
            (macko.DtypeError, lambda: mc.multiply((values, deltas, rows_ix.long(), rows, cols), v)),
            (macko.FormatError, lambda: mc.multiply((values, deltas, broken_ptr, rows, cols), v)),
            (macko.FormatError, lambda: mc.multiply((values, deltas, negative_ptr, rows, cols), v)),
            (macko.FormatError, lambda: mc.multiply((values, deltas[:-1], rows_ix, rows, cols), v)),
            (macko.FormatError, lambda: mc.multiply((values, deltas, rows_ix, rows + 1, cols), v)),
            (macko.DtypeError, lambda: mc.multiply(c[:4], v)),
        ]
        for i, (cls, call) in enumerate(cases):
            with self.subTest(case=i):
                with self.assertRaises(cls):
                    call()


@unittest.skipUnless("cuda" in DEVICES, "no CUDA device for torch and macko here")
class OnCuda(unittest.TestCase):
    def test_mixed_devices_are_refused(self):
        c = mc.compress(random_sparse(6, 40, 0.5, seed=8).cuda())
        with self.assertRaises(macko.ShapeError):
            mc.multiply(c, torch.ones(40, dtype=torch.float16))

    def test_compiled_with_cuda_graphs(self):
        dense = random_sparse(4096, 2 * 4096, 0.5, seed=9).cuda()
        c = mc.compress(dense)
        v = torch.rand(2 * 4096, dtype=torch.float16, device="cuda")
        eager = mc.multiply(c, v)
        compiled = torch.compile(mc.multiply, mode="reduce-overhead", fullgraph=True)
        for _ in range(3):
            got = compiled(c, v)
        self.assertTrue(torch.equal(got, eager))

        f = lambda x: mc.multiply(c, x + 1) - 1  # noqa: E731
        f_c = torch.compile(f, mode="reduce-overhead", fullgraph=True)
        for _ in range(3):
            got = f_c(v)
        assert_product(self, got + 1, dense, v + 1, "compiled f(v)")

    def test_first_use_inside_graph_capture_is_refused(self):
        c = mc.compress(random_sparse(64, 64, 0.5, seed=11).cuda())
        v = torch.rand(64, dtype=torch.float16, device="cuda")
        graph = torch.cuda.CUDAGraph()
        with self.assertRaises(macko.ConfigError):
            with torch.cuda.graph(graph):
                mc.multiply(c, v)


if __name__ == "__main__":
    unittest.main()

"""
HDBSCAN against its anchors on the same rows: gpuclust's CPU back end (every core) and
GPU back end, scikit-learn's HDBSCAN and the hdbscan library with an exact spanning tree
(approx_min_span_tree=False). Prints a table; --json writes the rows.

    make -C bench hdbscan_file_bench
    python3 bench/hdbscan_anchors.py                       # 100k and 1M 2-D blobs
    python3 bench/hdbscan_anchors.py --sizes 100000 --skip hdbscan --json out.json
    python3 bench/hdbscan_anchors.py --sizes 200000 --dims 5,8 --skip gpu,sklearn   # the k-d tree's range

The data: Gaussian blobs of different spreads in D dimensions (default 2) with 10 % uniform noise, as float32
(scikit-learn and the hdbscan library get the same values in double).
min_cluster_size = min_samples = 10 (the library's min_samples is one less: it does not
count the row itself). scikit-learn runs at 100k rows only unless --sklearn-max says
otherwise (it builds a dense O(n^2) spanning tree: about a minute at 100k).
Each labelling is compared with gpuclust's: the adjusted Rand index is printed (equal
labels up to numbering give 1; the anchors break ties in their own order).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RUNNER = os.path.join(ROOT, ".bench", "hdbscan_file_bench")


def blobs(n, d=2, seed=0):
    rng = np.random.default_rng(seed)
    m = n - n // 10
    centers = rng.uniform(-100, 100, size=(30, d))
    spread = rng.uniform(0.5, 4.0, size=30)
    which = rng.integers(0, 30, size=m)
    X = centers[which] + rng.normal(size=(m, d)) * spread[which, None]
    X = np.vstack([X, rng.uniform(-110, 110, size=(n - m, d))])
    return X[rng.permutation(n)].astype(np.float32)


def ari(a, b):
    from sklearn.metrics import adjusted_rand_score
    return adjusted_rand_score(a, b)


def run_gpuclust(path, n, d, device, threads):
    out = path + "." + device + ".labels"
    cmd = [RUNNER, path, str(n), str(d), "10", "10", "--device", device, "--labels", out,
           "--repeat", "2"]
    if threads:
        cmd += ["--threads", str(threads)]
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        return None, res.stderr.strip()
    row = json.loads(res.stdout)
    row["labels"] = np.fromfile(out, dtype=np.int32)
    return row, None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="100000,1000000")
    ap.add_argument("--dims", default="2", help="comma list of dimensions")
    ap.add_argument("--sklearn-max", type=int, default=100000)
    ap.add_argument("--skip", default="", help="comma list of: gpu, sklearn, hdbscan")
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--json")
    args = ap.parse_args()
    skip = set(filter(None, args.skip.split(",")))
    rows = []
    tmp = tempfile.mkdtemp()
    print(f"CPUs: {os.cpu_count()}")
    print(f"{'rows':>9} {'d':>3} {'method':<34} {'seconds':>9} {'clusters':>8} {'noise':>8} {'ARI vs CPU':>10}  note")
    for d, n in [(int(d), int(s)) for d in args.dims.split(",") for s in args.sizes.split(",")]:
        X = blobs(n, d)
        path = os.path.join(tmp, f"blobs{n}x{d}.f32")
        X.tofile(path)
        cpu, err = run_gpuclust(path, n, d, "cpu", args.threads)
        if cpu is None:
            sys.exit(f"gpuclust CPU failed: {err}")
        results = [("gpuclust CPU (%d threads)" % cpu["threads"], cpu["wall_ms"] / 1000, cpu["labels"],
                    f"core {cpu['core_ms']:.0f} ms, tree {cpu['mst_ms']:.0f} ms, rest {cpu['tree_ms']:.0f} ms")]
        if "gpu" not in skip:
            gpu, err = run_gpuclust(path, n, d, "gpu", 0)
            if gpu is None:
                results.append(("gpuclust GPU", None, None, err))
            else:
                results.append((f"gpuclust GPU ({gpu['device']})", gpu["wall_ms"] / 1000, gpu["labels"],
                                f"compute {gpu['compute_ms']:.1f} ms: core {gpu['core_ms']:.1f}, "
                                f"tree {gpu['mst_ms']:.1f}, rest {gpu['tree_ms']:.1f}; "
                                f"identical to CPU: {bool((gpu['labels'] == cpu['labels']).all())}"))
        Xd = X.astype(np.float64)
        if "sklearn" not in skip and n <= args.sklearn_max:
            from sklearn.cluster import HDBSCAN
            t0 = time.perf_counter()
            lab = HDBSCAN(min_cluster_size=10, min_samples=10, n_jobs=-1, copy=True).fit(Xd).labels_
            results.append(("scikit-learn HDBSCAN", time.perf_counter() - t0, lab, ""))
        if "hdbscan" not in skip:
            try:
                import hdbscan
                t0 = time.perf_counter()
                lab = hdbscan.HDBSCAN(min_cluster_size=10, min_samples=9,
                                      approx_min_span_tree=False, algorithm="boruvka_kdtree",
                                      core_dist_n_jobs=-1).fit(Xd).labels_
                results.append(("hdbscan library (boruvka_kdtree)", time.perf_counter() - t0, lab, ""))
            except ImportError:
                results.append(("hdbscan library", None, None, "not installed"))
        for name, secs, lab, note in results:
            if secs is None:
                print(f"{n:>9} {d:>3} {name:<34} {'-':>9} {'':>8} {'':>8} {'':>10}  {note}")
                continue
            a = ari(cpu["labels"], lab)
            ncl = int(lab.max()) + 1
            noise = int((lab < 0).sum())
            ratio = "" if name.startswith("gpuclust CPU") else f" ({secs / (cpu['wall_ms'] / 1000):.1f}x the CPU)"
            print(f"{n:>9} {d:>3} {name:<34} {secs:>9.3f} {ncl:>8} {noise:>8} {a:>10.4f}  {note}{ratio}")
            rows.append(dict(rows=n, d=d, method=name, seconds=secs, clusters=ncl, noise=noise, ari=a,
                             note=note, cpus=os.cpu_count()))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()

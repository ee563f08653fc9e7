"""
Draws doc/decision_graph.png: the decision graph (rho against delta) of a
sample set, and the clusters it gives.

    psql -f bench/dpeaks_decision_graph.sql        # writes /tmp/decision_graph.csv
    python3 bench/dpeaks_decision_graph.py /tmp/decision_graph.csv doc/decision_graph.png

Needs matplotlib (Debian: python3-matplotlib).
"""
import csv
import sys

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

src = sys.argv[1] if len(sys.argv) > 1 else "/tmp/decision_graph.csv"
dst = sys.argv[2] if len(sys.argv) > 2 else "doc/decision_graph.png"
rows = list(csv.DictReader(open(src)))
x = np.array([float(r["x"]) for r in rows])
y = np.array([float(r["y"]) for r in rows])
cl = np.array([int(r["cluster_id"]) for r in rows])
rho = np.array([float(r["rho"]) for r in rows])
delta = np.array([float(r["delta"]) for r in rows])
c = np.array([r["is_center"] == "t" for r in rows])

fig, ax = plt.subplots(1, 2, figsize=(12, 5.2))
ax[0].scatter(rho[~c], delta[~c], s=6, c="0.55", label="other rows")
ax[0].scatter(rho[c], delta[c], s=30, c="crimson", label="centres (rho_min => 20, delta_min => 1)")
ax[0].axhline(1.0, color="crimson", lw=0.8, ls="--")
ax[0].axvline(20.0, color="crimson", lw=0.8, ls="--")
ax[0].set_yscale("log")
ax[0].set_xlabel("rho (gaussian kernel)")
ax[0].set_ylabel("delta (distance to the nearest denser row, log scale)")
ax[0].set_title("Decision graph of %s rows: centres stand apart" % format(len(rows), ","))
ax[0].legend(loc="lower right")
cmap = plt.get_cmap("tab20")
ax[1].scatter(x, y, s=4, c=[cmap(v % 20) for v in cl])
ax[1].scatter(x[c], y[c], s=60, marker="x", c="black", label="centres")
ax[1].set_title("The %d clusters (cluster_id); the data has 31 blobs, some merged" % len(set(cl)))
ax[1].set_aspect("equal")
ax[1].legend(loc="upper right")
fig.tight_layout()
fig.savefig(dst, dpi=90)

"""
Draws doc/hdbscan_tree.png: HDBSCAN's condensed tree, from gpu_hdbscan_tree, beside
the clusters gpu_hdbscan gives, for blobs of very different densities (no single
DBSCAN eps fits them all).

    python3 bench/hdbscan_tree_plot.py [doc/hdbscan_tree.png]

Talks to the server named by the libpq environment (PGHOST, PGPORT, ...), where
gpuclust is installed; creates and drops the table hdb_plot. Needs numpy, psycopg2
and matplotlib (Debian: python3-numpy python3-psycopg2 python3-matplotlib).
"""
import io
import sys

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import psycopg2

dst = sys.argv[1] if len(sys.argv) > 1 else "doc/hdbscan_tree.png"
rng = np.random.default_rng(3)
parts = [rng.normal((0, 0), 0.15, (400, 2)), rng.normal((2, 0.5), 0.5, (500, 2)),
         rng.normal((5, 3), 1.2, (600, 2)), rng.normal((0.6, 0.3), 0.08, (150, 2)),
         rng.uniform(-3, 9, (150, 2))]
X = np.round(np.vstack(parts), 3)

conn = psycopg2.connect("")
conn.autocommit = True
cur = conn.cursor()
cur.execute("CREATE EXTENSION IF NOT EXISTS gpuclust")
cur.execute("DROP TABLE IF EXISTS hdb_plot")
cur.execute("CREATE TABLE hdb_plot (id bigint, x float8, y float8)")
buf = io.StringIO("".join(f"{i}\t{a}\t{b}\n" for i, (a, b) in enumerate(X)))
cur.copy_from(buf, "hdb_plot")
q = "SELECT id, x, y FROM hdb_plot ORDER BY id"
cur.execute("SELECT parent, child, lambda_val, child_size, selected, cluster_id"
            " FROM gpu_hdbscan_tree(%s, min_cluster_size => 25, min_samples => 10)"
            " WHERE child IS NOT NULL", (q,))
nodes = cur.fetchall()
cur.execute("SELECT parent, lambda_val FROM gpu_hdbscan_tree(%s, min_cluster_size => 25,"
            " min_samples => 10) WHERE child IS NULL", (q,))
leaves = cur.fetchall()
cur.execute("SELECT cluster_id FROM gpu_hdbscan(%s, min_cluster_size => 25, min_samples => 10)"
            " ORDER BY id", (q,))
labels = np.array([-1 if r[0] is None else r[0] for r in cur.fetchall()])
cur.execute("DROP TABLE hdb_plot")

# the tree: node -> (parent, birth lambda, size, selected, cluster); death = last lambda under it
info = {c: (p, lam, size, sel, cid) for p, c, lam, size, sel, cid in nodes}
kids = {}
for p, c, lam, size, sel, cid in nodes:
    if p is not None:
        kids.setdefault(p, []).append(c)
death = {}
for p, lam in leaves:
    death[p] = max(death.get(p, 0.0), lam)
for c in sorted(info, reverse=True):
    for k in kids.get(c, []):
        death[c] = max(death.get(c, 0.0), info[k][1])
top = max(v for v in death.values() if np.isfinite(v))

# leaves left to right, parents centred over their children
xpos, order = {}, []


def place(c):
    if c not in kids:
        xpos[c] = len(order)
        order.append(c)
    else:
        for k in kids[c]:
            place(k)
        xpos[c] = np.mean([xpos[k] for k in kids[c]])


place(0)
fig, ax = plt.subplots(1, 2, figsize=(13, 5.4))
cmap = plt.get_cmap("tab10")
for c, (p, lam, size, sel, cid) in info.items():
    width = 0.15 + 0.8 * np.sqrt(size / len(X))
    d = min(death.get(c, lam), top)
    color = cmap(cid % 10) if sel and cid is not None else "0.7"
    ax[0].bar(xpos[c], d - lam, bottom=lam, width=width, color=color,
              edgecolor="black" if sel else "none", linewidth=1.2)
    for k in kids.get(c, []):
        ax[0].plot([xpos[c], xpos[k]], [info[k][1], info[k][1]], color="0.3", lw=0.8)
ax[0].invert_yaxis()
ax[0].set_xticks([])
ax[0].set_ylabel("lambda = 1 / distance (denser downwards)")
ax[0].set_title("Condensed tree (gpu_hdbscan_tree): selected clusters framed")
ax[1].scatter(X[labels < 0, 0], X[labels < 0, 1], s=3, c="0.75", label="noise")
for k in range(labels.max() + 1):
    m = labels == k
    ax[1].scatter(X[m, 0], X[m, 1], s=4, color=cmap(k % 10), label=f"cluster {k}")
ax[1].set_title("gpu_hdbscan(min_cluster_size => 25, min_samples => 10)")
ax[1].legend(loc="upper left", markerscale=3, fontsize=8)
fig.tight_layout()
fig.savefig(dst, dpi=90)
print(f"wrote {dst}: {len(info)} cluster nodes, {labels.max() + 1} clusters, "
      f"{(labels < 0).sum()} noise rows")

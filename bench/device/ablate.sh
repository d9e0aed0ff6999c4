#!/usr/bin/env bash
# The paper's ablation suites on a lent GPU machine in one `run` call, and what a CPU session needs back.
# bench/device/prepare.sh builds the bundle (.device/) here and prints this script's call; README.md beside it.
#
#   bash bench/device/ablate.sh SUITE [--- SUITE ...]   # SUITE: `bertlab ablate run`'s arguments, e.g.
#                                                       #   table7 --committed-recipe --data ../shared/data
#   RESUME=1 bash bench/device/ablate.sh                # the next call on the same, still-warm machine: follow
#                                                       #   (and resume) the suites the last call left unfinished
#   DEV=cpu DEADLINE_S=300 nice bash bench/device/ablate.sh ...   # a rehearsal on a CPU, tiny settings
#   bash bench/device/ablate.sh successors-pretrain [--set KEY=VALUE ...]   # BERT's successors (#54): their own
#   bash bench/device/ablate.sh successors-finetune [ARGS ...]              #   pretraining jobs, then the suite
#   bash bench/device/ablate.sh successors [PRETRAIN OPTIONS] --- [ARGS]    #   of the finished rows (successors.sh)
#
# It unpacks the bundle (data in ../shared/data's layout; gensim for the `default` corpus) and links
# ../shared/data to it when the checkout has none beside it, so the suites' recorded paths hold; starts CUDA
# MPS; queues every suite at once (--no-estimate: no minutes spent timing steps), follows them until they end
# or DEADLINE_S, packing $OUT every minute; then collects, exports and packs once more and prints a summary.
# $OUT (at most 8 files): summary.txt (this log), results.tar.gz, models.tar.part-NN (bench/device/pack.py).
#
# Settings (environment), with defaults: DEV (cuda when nvidia-smi sees a GPU, else cpu), DEADLINE_S=540
# (seconds from the start to stop waiting; a call runs 600 at most), JOBS_PER_GPU=14, CPU_SLOTS=1,
# MODELS_MB=60 (fp16 models brought back, smallest first), POLL_S=5, BUNDLE=.device, UNPACK=/tmp/bertlab-device,
# OUT (the run tool sets it; else device-out/), BERTLAB_RUNS (runs/).
set -u
start=$(date +%s)
cd "$(dirname "$0")/../.." || exit 1
repo=$PWD
OUT=${OUT:-$repo/device-out}
mkdir -p "$OUT"
# Everything below lands in summary.txt too. tee is a child: wait for it by its pid (a bare `wait` after this
# waited on it for ever in a past session), and nothing long-lived may keep this pipe open (MPS gets its own log).
exec > >(tee -a "$OUT/summary.txt") 2>&1
tee_pid=$!
finish() {
  exec 1>&- 2>&-
  for _ in 1 2 3 4 5 6 7 8 9 10; do kill -0 "$tee_pid" 2>/dev/null || break; sleep 0.5; done
}
trap finish EXIT
say() { printf '\n== [%4ss] %s\n' "$(($(date +%s) - start))" "$*"; }

DEADLINE_S=${DEADLINE_S:-540}
JOBS_PER_GPU=${JOBS_PER_GPU:-14}
MODELS_MB=${MODELS_MB:-60}
BUNDLE=${BUNDLE:-$repo/.device}
UNPACK=${UNPACK:-/tmp/bertlab-device}
export BERTLAB_RUNS=${BERTLAB_RUNS:-$repo/runs}
export PYTHONUNBUFFERED=1
work=$UNPACK/work
deadline=$((start + DEADLINE_S))
if [ -z "${DEV:-}" ]; then
  if nvidia-smi -L >/dev/null 2>&1; then DEV=cuda; else DEV=cpu; fi
fi

say "unpack the bundle $BUNDLE into $UNPACK"
mkdir -p "$UNPACK" "$work"
for archive in data site; do
  if [ -f "$BUNDLE/$archive.tar.gz" ]; then
    rm -rf "${UNPACK:?}/$archive"
    tar -xzf "$BUNDLE/$archive.tar.gz" -C "$UNPACK" || { echo "cannot unpack $BUNDLE/$archive.tar.gz"; exit 1; }
  fi
done
bundle() { python3 -c "import json,sys; print(json.load(open(sys.argv[1])).get(sys.argv[2]) or '')" "$BUNDLE/bundle.json" "$1" 2>/dev/null; }
[ -d "$UNPACK/site" ] && export PYTHONPATH=$UNPACK/site${PYTHONPATH:+:$PYTHONPATH}
export PYTHONPATH=$repo${PYTHONPATH:+:$PYTHONPATH}
python=$(python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')
built=$(bundle python)
if [ -n "$built" ] && [ "$built" != "$python" ]; then
  echo "the bundle's wheels are for Python $built, this python3 is $python: run prepare.sh --python $python"
fi
if [ -d "$UNPACK/site/gensim" ]; then
  python3 -c "import gensim; print('gensim', gensim.__version__, 'from', gensim.__file__)" || {
    echo "gensim from the bundle does not import: the 'default' corpus cannot be read"; exit 1; }
fi
# The suites name their data as ../shared/data (the committed sets' records do): make it the bundle's.
if [ -d "$UNPACK/data" ] && [ ! -e ../shared/data ]; then
  if mkdir -p ../shared 2>/dev/null && ln -sfn "$UNPACK/data" ../shared/data; then
    echo "../shared/data -> $UNPACK/data"
  else
    echo "cannot link ../shared/data here: give --data $UNPACK/data and the corpus paths under it"
  fi
fi
# The suites' record names the code that ran; a copy of the checkout may have no .git
if ! git rev-parse --short HEAD >/dev/null 2>&1 && [ -n "$(bundle commit)" ]; then
  export BERTLAB_COMMIT=$(bundle commit)
  echo "no git here: the suites record commit $BERTLAB_COMMIT (the bundle's)"
fi

if [ "$DEV" = cuda ]; then
  say "GPU and MPS"
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
  python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.cuda.is_available())"
  if command -v nvidia-cuda-mps-control >/dev/null; then
    # a daemon: its own log and no inherited pipe (tee above would wait on it); a second start says it runs already
    nvidia-cuda-mps-control -d </dev/null >"$work/mps.log" 2>&1 && echo "MPS started" || echo "MPS: $(cat "$work/mps.log")"
  else
    echo "no nvidia-cuda-mps-control: the jobs share the GPU without MPS"
  fi
  export BERTLAB_JOBS_PER_GPU=$JOBS_PER_GPU
else
  export BERTLAB_CPU_SLOTS=${CPU_SLOTS:-1} OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
fi
# what ran, for results.tar.gz: the device, this call's arguments and the bundle's manifest
python3 - "$work/device.json" "$DEV" "$BUNDLE/bundle.json" "$@" <<'EOF'
import json, os, platform, subprocess, sys, time
out, dev, manifest, argv = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
gpu = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                     capture_output=True, text=True).stdout.strip() if dev == "cuda" else ""
bundle = json.load(open(manifest)) if os.path.isfile(manifest) else None
json.dump({"started": time.time(), "device": dev, "gpu": gpu, "python": platform.python_version(),
           "jobs_per_gpu": os.environ.get("BERTLAB_JOBS_PER_GPU"), "resume": os.environ.get("RESUME", "0"),
           "argv": argv, "bundle": bundle}, open(out, "w"), indent=1)
EOF

# BERT's successors are pretrained by their own configs, then fine-tuned as a suite: bench/device/successors.sh
case ${1:-} in
  successors | successors-pretrain | successors-finetune)
    # shellcheck source=bench/device/successors.sh
    . "$repo/bench/device/successors.sh"
    ;;
esac

suites=()
if [ "${RESUME:-0}" = 1 ]; then
  say "resume: the suites an earlier call left unfinished in $BERTLAB_RUNS"
  timeout 120 python3 -m bertlab jobs resume --interrupted
  read -r -a suites <<<"$(timeout 120 python3 -m bench.device.pack pending)"
  [ "${#suites[@]}" -eq 0 ] && echo "none: a fresh machine keeps nothing from the last call; launch the suites again"
else
  [ "$#" -gt 0 ] || { echo "give a suite: bash bench/device/ablate.sh table7 --committed-recipe ... (see README.md)"; exit 2; }
  args=()
  for a in "$@" ---; do
    case $a in --wait | --collect | --wait-max-s) echo "leave out $a: ablate.sh waits and collects itself"; exit 2 ;; esac
    if [ "$a" != --- ]; then args+=("$a"); continue; fi
    [ "${#args[@]}" -gt 0 ] || continue
    say "queue: bertlab ablate run ${args[*]}"
    # --device first, so that a --device among the suite's own arguments wins
    line=$(timeout 300 python3 -m bertlab ablate --json run --device "$DEV" --no-estimate "${args[@]}" | tail -n 1)
    id=$(python3 -c "import json,sys; print(json.loads(sys.argv[1])['suite'])" "$line" 2>/dev/null)
    if [ -n "$id" ]; then suites+=("$id"); echo "$line"; else echo "not queued (the error is above)"; fi
    args=()
  done
fi
[ "${#suites[@]}" -gt 0 ] || { say "nothing to follow"; exit 1; }

say "follow ${suites[*]} until $((deadline - start)) s"
# the watcher stops itself at the deadline; `timeout` is the guard should it not
guard=$((deadline - $(date +%s) + 60)); [ "$guard" -ge 60 ] || guard=60
timeout "$guard" python3 -m bench.device.pack wait --until "$deadline" --poll-s "${POLL_S:-5}" \
  --out "$OUT" --work "$work" --models-mb "$MODELS_MB" "${suites[@]}"
status=$?
say "collect, export and pack"
timeout 150 python3 -m bench.device.pack pack --out "$OUT" --work "$work" --models-mb "$MODELS_MB" "${suites[@]}"
say "done in $(($(date +%s) - start)) s (status $status: 0 when every run finished)"
exit $status

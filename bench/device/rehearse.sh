#!/usr/bin/env bash
# Rehearse the device recipe on this CPU at tiny scale, as a run call would go: prepare.sh's bundle (for this
# Python), a copy of the checkout as the call sends it (tracked and untracked-not-ignored files, the bundle as
# .device, no ../shared beside it), ablate.sh there with DEV=cpu, then pack.py's restore of what came back.
#
#   nice bash bench/device/rehearse.sh              # tiny Table 6: two shapes of 2 layers, 60k tokens of the
#                                                   # committed corpus, SST-2 on 300 sentences, one seed
#   TABLES=table7 nice bash bench/device/rehearse.sh table7 --tasks upos --max-train-examples 200 ...
#   TABLES=successors THEN="successors-finetune --tasks sst2 ..." nice bash bench/device/rehearse.sh \
#       successors-pretrain --set size=tiny ...     # two calls on one "warm machine": the second's args in THEN
#
# Environment: TABLES (the bundle's tables; default table6), PREPARE_ARGS (more prepare.sh arguments, e.g.
# `--shared DIR --no-wheels`), WHERE (default ${TMPDIR:-/tmp}/bertlab-rehearsal, emptied first), THEN (a second
# ablate.sh call's arguments, run after the first in the same copy, as on a still-warm machine; its files come back
# to out2/ and are restored into restored2/), and ablate.sh's (DEADLINE_S, MODELS_MB, POLL_S). One CPU thread a
# job, one job at a time.
set -euo pipefail
cd "$(dirname "$0")/../.."
repo=$PWD
where=${WHERE:-${TMPDIR:-/tmp}/bertlab-rehearsal}
if [ "$#" -eq 0 ]; then
  set -- table6 --grid 2/64/2,2/128/2 --budget-tokens 60000 --seeds 1 --tasks sst2 --max-train-examples 300 \
    --max-eval-examples 200 --epochs 1 --threads 1 --data ../shared/data \
    --corpus default,../shared/data/corpus/gutenberg,../shared/data/corpus/wikitext-2-raw \
    --set train.batch_size=16 --set eval_instances=64 --set train.eval_every=20 --set train.save_every=1000000 \
    --set train.compile=false
fi
t0=$(date +%s)
rm -rf "$where"
mkdir -p "$where/repo"
python=$(python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')
# shellcheck disable=SC2086  # PREPARE_ARGS is a list of words
bash bench/device/prepare.sh ${TABLES:-table6} --out "$where/bundle" --python "$python" ${PREPARE_ARGS:-}
{ git ls-files -z; git ls-files -z --others --exclude-standard; } | tar --null -T - -cf - | tar -xf - -C "$where/repo"
cp -r "$where/bundle" "$where/repo/.device"
echo "== a copy of the checkout in $where/repo ($(du -sh "$where/repo" | cut -f1)), nothing beside it"
t1=$(date +%s)
status=0
(cd "$where/repo" && OUT="$where/out" UNPACK="$where/unpack" DEV=cpu OMP_NUM_THREADS=1 BERTLAB_RUNS="$where/repo/runs" \
  DEADLINE_S=${DEADLINE_S:-540} bash bench/device/ablate.sh "$@") || status=$?
t2=$(date +%s)
echo "== came back: $(cd "$where/out" && ls | tr '\n' ' ')"
python3 -m bench.device.pack restore "$where/out" "$where/restored"
if [ -n "${THEN:-}" ]; then
  read -r -a then_args <<<"$THEN"
  echo "== the second call: ablate.sh ${then_args[*]}"
  (cd "$where/repo" && OUT="$where/out2" UNPACK="$where/unpack" DEV=cpu OMP_NUM_THREADS=1 \
    BERTLAB_RUNS="$where/repo/runs" DEADLINE_S=${DEADLINE_S:-540} bash bench/device/ablate.sh "${then_args[@]}") || status=$?
  echo "== came back: $(cd "$where/out2" && ls | tr '\n' ' ')"
  python3 -m bench.device.pack restore "$where/out2" "$where/restored2"
fi
echo "== rehearsal: prepare + copy $((t1 - t0)) s, ablate.sh $((t2 - t1)) s (status $status), all $(($(date +%s) - t0)) s"
exit "$status"

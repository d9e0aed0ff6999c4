# BERT's successors (#54) on the device: sourced by ablate.sh after its setup (bundle unpacked, ../shared/data
# linked, MPS started, device.json written), with its variables (start, deadline, DEV, OUT, work, MODELS_MB,
# BUNDLE, say). Not run on its own. README.md beside it, section "successors".
#
#   ablate.sh successors-pretrain [--variants bert,electra] [--set KEY=VALUE ...]
#       queue the five pretraining jobs (configs/successors/, the suite's corpus) on $DEV, follow them to the
#       deadline, export the finished models in fp16 and pack their run folders and models into $OUT
#   ablate.sh successors-finetune [`bertlab ablate run successors` ARGS ...]
#       follow any pretraining runs still going here, then queue the fine-tuning suite of the finished rows not
#       in a successors suite yet (`--row-model` each; models here, else in MODELS_FROM, default
#       $BUNDLE/runs, where `pack.py restore` put an earlier call's), follow every successors suite not ended
#       to the deadline, collect and pack; ROWS=bert,electra keeps only those rows
#   ablate.sh successors [PRETRAIN OPTIONS] --- [FINETUNE ARGS]
#       both in one call: fine-tuning starts as soon as every pretraining run has ended
#
# Without FINETUNE ARGS the suite is `--committed-recipe` (SST-2, MRPC, QNLI, RTE, SQuAD; three seeds).
phase=$1
shift
pre=()
ft=()
case $phase in
  successors-pretrain) pre=("$@") ;;
  successors-finetune) ft=("$@") ;;
  successors)
    side=pre
    for a in "$@"; do
      if [ "$a" = --- ]; then side=ft; elif [ "$side" = pre ]; then pre+=("$a"); else ft+=("$a"); fi
    done
    ;;
esac
for a in "${ft[@]}"; do
  case $a in --wait | --collect | --wait-max-s | --row-model)
    echo "leave out $a: ablate.sh finds the rows' models, waits and collects itself"; exit 2 ;;
  esac
done
[ "${#ft[@]}" -gt 0 ] || ft=(--committed-recipe)
MODELS_FROM=${MODELS_FROM:-$BUNDLE/runs}
follow() {  # follow suites and/or pretraining jobs to the deadline, packing $OUT every minute
  local guard=$((deadline - $(date +%s) + 60))
  [ "$guard" -ge 60 ] || guard=60
  timeout "$guard" python3 -m bench.device.pack wait --until "$deadline" --poll-s "${POLL_S:-5}" \
    --out "$OUT" --work "$work" --models-mb "$MODELS_MB" "$@"
}

jobs=()
status=0
if [ "$phase" != successors-finetune ]; then
  if [ "${RESUME:-0}" = 1 ]; then
    say "resume interrupted jobs"
    timeout 120 python3 -m bertlab jobs resume --interrupted
  fi
  say "queue the successors' pretraining on $DEV: python -m bench.device.successors submit ${pre[*]}"
  read -r -a jobs <<<"$(timeout 300 python3 -m bench.device.successors submit --device "$DEV" "${pre[@]}")"
  [ "${#jobs[@]}" -gt 0 ] || { say "nothing queued (the error is above)"; exit 1; }
else
  read -r -a jobs <<<"$(timeout 60 python3 -m bench.device.successors jobs)"
fi
if [ "${#jobs[@]}" -gt 0 ]; then
  say "follow the pretraining ${jobs[*]} until $((deadline - start)) s"
  follow --jobs "${jobs[@]}"
  status=$?
fi

suites=()
if [ "$phase" != successors-pretrain ]; then
  read -r -a suites <<<"$(timeout 60 python3 -m bench.device.successors suites)"
  [ "${#suites[@]}" -eq 0 ] || echo "successors suites here not ended yet: ${suites[*]}"
  if [ $((deadline - $(date +%s))) -lt 30 ]; then
    say "too close to the deadline to queue the fine-tuning: call ablate.sh successors-finetune next"
  else
    mapfile -t rows < <(timeout 60 python3 -m bench.device.successors rows --from "$MODELS_FROM")
    if [ "${#rows[@]}" -gt 0 ] && [ -n "${rows[0]}" ]; then
      say "queue: bertlab ablate run successors --device $DEV --no-estimate ${ft[*]} ${rows[*]}"
      line=$(timeout 300 python3 -m bertlab ablate --json run successors --device "$DEV" --no-estimate "${ft[@]}" \
        "${rows[@]}" | tail -n 1)
      id=$(python3 -c "import json,sys; print(json.loads(sys.argv[1])['suite'])" "$line" 2>/dev/null)
      if [ -n "$id" ]; then suites+=("$id"); echo "$line"; else echo "not queued (the error is above)"; status=1; fi
    else
      echo "no new row to fine-tune"
    fi
  fi
  if [ "${#suites[@]}" -gt 0 ]; then
    say "follow ${suites[*]} until $((deadline - start)) s"
    follow "${suites[@]}" --jobs "${jobs[@]}"
    status=$?
  fi
fi

say "collect, export and pack"
timeout 150 python3 -m bench.device.pack pack --out "$OUT" --work "$work" --models-mb "$MODELS_MB" "${suites[@]}" \
  --jobs "${jobs[@]}"
say "done in $(($(date +%s) - start)) s (status $status: 0 when every run followed finished)"
exit $status

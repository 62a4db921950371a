#!/usr/bin/env bash
# Issue 9 steps 3-5 on the GPU machine (after device.sh install): free-memory refusal, the orphan,
# rollback for real. Writes its evidence to $OUT. Run from the repo root.
export PYTHONPATH=$PWD:/tmp/site:/tmp/gate-site PYTHONUNBUFFERED=1 VLLM_USE_FLASHINFER_SAMPLER=0 HF_HUB_OFFLINE=1 VLLM_NO_USAGE_STATS=1
L="python3 -m launcher.cli --profiles-dir scripts/real-vllm/profiles --state-dir /tmp/gs"
V="python3 -m vllm.entrypoints.cli.main serve /root/tiny --served-model-name tiny --max-model-len 2048"
now() { date +%s.%N; }
# 3. another process holds 120 GiB: preflight refuses; without preflight vLLM fails by itself
python3 -c "import torch,time;x=torch.empty(120*2**30,dtype=torch.uint8,device='cuda');open('/tmp/held','w').write('1');time.sleep(900)" & H=$!
until [ -f /tmp/held ]; do sleep 0.5; done
$L preflight --profile tiny > $OUT/b-preflight.txt 2>&1; echo "rc=$?" >> $OUT/b-preflight.txt
timeout 120 $V --port 8013 --gpu-memory-utilization 0.5 > $OUT/b-vllm.log 2>&1; echo "rc=$?" >> $OUT/b-vllm.log
$L parse-log $OUT/b-vllm.log --json > $OUT/b-facts.json 2>&1
kill $H; wait $H 2>/dev/null; sleep 2
# 4. SIGKILL the API server only: the engine lives on as an orphan
setsid $V --port 8013 --gpu-memory-utilization 0.3 > $OUT/a-vllm.log 2>&1 & A=$!
timeout 200 bash -c "until grep -q 'Application startup complete' $OUT/a-vllm.log; do sleep 1; done"
kill -9 $A; sleep 3; echo "killed api server $A" > $OUT/a-reap.txt
$L preflight --profile tiny --json > $OUT/a-preflight.json 2>&1; echo "preflight rc=$?" >> $OUT/a-reap.txt
nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv >> $OUT/a-reap.txt
s=$(now); $L preflight --profile tiny --reap-orphans >> $OUT/a-reap.txt 2>&1
echo "reap rc=$? seconds=$(python3 -c "print($(now)-$s)")" >> $OUT/a-reap.txt
nvidia-smi --query-gpu=memory.used,memory.total --format=csv >> $OUT/a-reap.txt
# 5. promote, then a change that makes vLLM fail: rejected, last-good serves again
$L set tiny gates.tool_call.required=false --tag opt > $OUT/c-launch.txt 2>&1
$L --profile tiny >> $OUT/c-launch.txt 2>&1 & P=$!
timeout 200 bash -c 'until grep -q "\"phase\": \"serving\"" /tmp/gs/profiles/tiny/status.json 2>/dev/null; do sleep 1; done'
s=$(now); $L set tiny tool_call_parser=hermez --tag bad --apply --timeout-s 200 >> $OUT/c-launch.txt 2>&1
echo "set rc=$? seconds=$(python3 -c "print($(now)-$s)")" >> $OUT/c-launch.txt
$L status --json >> $OUT/c-launch.txt; $L history >> $OUT/c-launch.txt
kill $P; wait $P; echo "launcher rc=$?" >> $OUT/c-launch.txt; tail -5 $OUT/c-launch.txt

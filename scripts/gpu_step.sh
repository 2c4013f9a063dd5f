# Sourced by the GPU part scripts: `step SECONDS NAME CMD...` runs one timed step (killed 3 s
# after its limit), prints "== NAME rc=R in T s" and notes a failure in the caller's rc. Also
# their common start: OUT (the part's output folder, default ./out, made here), PYTHONPATH (the
# checkout's package and test helpers, unless set) and rc (0 until a step fails).
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
export PYTHONPATH=${PYTHONPATH:-python:tests/python}
rc=0
step() {
  local limit=$1 name=$2 t0 r
  shift 2
  t0=$(date +%s)
  timeout -k 3 "$limit" "$@"
  r=$?
  echo "== $name rc=$r in $(( $(date +%s) - t0 )) s"
  [ $r = 0 ] || rc=1
}

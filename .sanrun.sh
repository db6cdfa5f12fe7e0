cd /work/wt/lead2
for t in "$@"; do
  f=$(ls tests/integration/${t}_*.sh | head -1)
  SPACE_SAN=1 SPACE_TOP=$PWD SPACE_BIN=$PWD/build-san/bin SPACE_VECTORS=/work/shared/vectors nice timeout 900 sh $f > /work/notes/logs/lead2_san_$t.log 2>&1
  echo "$t rc=$? $(grep -c '^ok' /work/notes/logs/lead2_san_$t.log) ok $(grep -c '^not ok' /work/notes/logs/lead2_san_$t.log) notok" >> /work/notes/logs/lead2_san_summary
done
echo DONE >> /work/notes/logs/lead2_san_summary

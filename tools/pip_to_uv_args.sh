# Sourced by bin/bootstrap and tools/lock/lock.sh: pip's configuration (files or PIP_* variables) as uv's
# arguments in the array uv_args, since uv does not read pip's: where wheels lie, the indexes, their
# constraints (only when $1 is "with-constraints"), the CA bundle.
uv_args=()
while IFS= read -r line; do
  key=${line%%=*} && key=${key##*.} && value=${line#*=} && value=${value#\'} && value=${value%\'}
  for v in $value; do
    case $key in
      find-links) uv_args+=(--find-links "$v") ;;
      index-url) uv_args+=(--index-url "$v") ;;
      extra-index-url) uv_args+=(--extra-index-url "$v") ;;
      constraint) [ "${1:-}" = with-constraints ] && uv_args+=(--constraints "$v") ;;
      cert) export SSL_CERT_FILE=$v ;;
    esac
  done
done < <(.venv/bin/python -m pip config list 2>/dev/null | sort -u)

#!/bin/bash
# 05-layout.t -- the modules keep to their floors, read from the libraries
# as built (nm): every name a module's library leaves undefined is defined
# by a module it may use, or is outside the tree (libc, the foreign
# libraries); and search/ -- the method -- calls nothing of libc but
# memory, string, sorting and formatting functions: no file, no clock, no
# process, no network; and every relative link in the docs resolves
# (scripts/check-links).  Prints TAP.
set -u
cd "$(dirname "$0")/../.." || exit 1
B=${STARK_BUILD:-build}

# What each module may use (docs/DEVELOPING.md, Layout: higher floors use
# lower ones).
declare -A MAY=(
	[common]=""
	[proto]="common"
	[sandbox]="common"
	[store]="common"
	[llm]="common"
	[search]="common"
	[pool]="common proto sandbox"
	[engine]="common proto store llm search pool"
	[report]="common proto store search engine"
	[cli]="common proto sandbox store llm search pool engine report"
	[evaluator]="common proto sandbox"
)
# libc calls the method may make, and what compilers and sanitizers add.
SEARCH_LIBC='malloc|calloc|realloc|free|mem(cpy|move|set|cmp|chr|mem)|str(len|n?cmp|r?chr|str|n?dup|c?spn|pbrk|n?casecmp)|strto(u?l|u?ll|d|f)|(__isoc99_)?sscanf|v?snprintf|qsort|bsearch|to(lower|upper)|__ctype_[a-z_]+|__[a-z0-9_]+_chk|__stack_chk_fail|__(asan|ubsan|sanitizer)_[A-Za-z0-9_]+|_GLOBAL_OFFSET_TABLE_'

echo "1..$((${#MAY[@]} + 2))"

# The last test: the Markdown files' relative links and anchors resolve.
links() { # test-number
	local out
	if out=$(scripts/check-links 2>&1); then
		echo "ok $1 - every relative link in the Markdown files resolves"
	else
		echo "not ok $1 - broken links in the Markdown files:"
		printf '%s\n' "$out" | head -n 20 | sed 's/^/#   /'
	fi
}

command -v nm >/dev/null || {
	for ((i = 1; i <= ${#MAY[@]} + 1; i++)); do echo "ok $i # skip no nm"; done
	links $((${#MAY[@]} + 2))
	exit 0
}

# defs: "symbol module" for every name a module's library defines.
defs=$(mktemp)
trap 'rm -f "$defs"' EXIT
for m in "${!MAY[@]}"; do
	[ -f "$B/lib$m.a" ] || continue
	nm --defined-only "$B/lib$m.a" 2>/dev/null | awk -v m="$m" 'NF == 3 && $2 ~ /[TDBRCVW]/ {print $3, m}'
done | sort -u >"$defs"

n=0
for m in $(printf '%s\n' "${!MAY[@]}" | sort); do
	n=$((n + 1))
	if [ ! -f "$B/lib$m.a" ]; then
		echo "not ok $n - $m: $B/lib$m.a is not built"
		continue
	fi
	bad=$(nm -u "$B/lib$m.a" 2>/dev/null | awk 'NF == 2 {print $2}' | sort -u |
		join - "$defs" | awk -v m="$m" -v may=" ${MAY[$m]} " \
			'$2 != m && index(may, " " $2 " ") == 0 {print $1 " (" $2 ")"}' | sort -u)
	if [ -z "$bad" ]; then
		echo "ok $n - $m uses only ${MAY[$m]:-libc and foreign libraries}"
	else
		echo "not ok $n - $m reaches modules it may not use:"
		printf '%s\n' "$bad" | head -n 20 | sed 's/^/#   /'
	fi
done

n=$((n + 1))
ours=$(awk '{print $1}' "$defs")
bad=$(nm -u "$B/libsearch.a" 2>/dev/null | awk 'NF == 2 {print $2}' | sort -u |
	grep -vxF -f <(printf '%s\n' "$ours") | grep -vxE "$SEARCH_LIBC")
if [ -z "$bad" ]; then
	echo "ok $n - search calls no I/O, clock or process function"
else
	echo "not ok $n - search calls functions outside its allowlist:"
	printf '%s\n' "$bad" | head -n 20 | sed 's/^/#   /'
fi

links $((n + 1))

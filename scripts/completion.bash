# bash completion for stark (installed as
# $(BASHCOMPDIR)/stark): commands, their options, and the ids of runs and
# benches of the store the command line names (--store DIR, else stark's
# default), read with `stark list --ids`, which never creates or migrates a
# store.

_stark_ids() { # runs|benches|all
	local store="" i
	for ((i = 1; i < COMP_CWORD; i++)); do
		case "${COMP_WORDS[i]}" in
		--store) store=${COMP_WORDS[i + 1]} ;;
		--store=*) store=${COMP_WORDS[i]#--store=} ;;
		esac
	done
	"${COMP_WORDS[0]}" list --ids="$1" ${store:+--store "$store"} 2>/dev/null
}

_stark() {
	local cur prev cmd opts ids=""
	cur=${COMP_WORDS[COMP_CWORD]}
	prev=${COMP_WORDS[COMP_CWORD - 1]}
	if [ "$COMP_CWORD" -eq 1 ]; then
		mapfile -t COMPREPLY < <(compgen -W "eval run bench resume show export list report doctor version help --version --help" -- "$cur")
		return
	fi
	cmd=${COMP_WORDS[1]}
	case "$prev" in
	--store | --cache | -o | --config | --batch | --gpu-lock)
		mapfile -t COMPREPLY < <(compgen -f -- "$cur")
		return ;;
	--device)
		mapfile -t COMPREPLY < <(compgen -W "cpu cuda cuda:0 cuda:1 all" -- "$cur")
		return ;;
	--policy)
		mapfile -t COMPREPLY < <(compgen -W "stark sampling reflexion" -- "$cur")
		return ;;
	--policies)
		mapfile -t COMPREPLY < <(compgen -W "stark,sampling,reflexion stark,sampling stark sampling reflexion" -- "$cur")
		return ;;
	--format)
		mapfile -t COMPREPLY < <(compgen -W "kernelbench fast" -- "$cur")
		return ;;
	--baseline)
		mapfile -t COMPREPLY < <(compgen -W "eager compile" -- "$cur")
		return ;;
	--verdict)
		mapfile -t COMPREPLY < <(compgen -W "stark kernelbench" -- "$cur")
		return ;;
	--l2-flush)
		mapfile -t COMPREPLY < <(compgen -W "on off" -- "$cur")
		return ;;
	--stage)
		mapfile -t COMPREPLY < <(compgen -W "all split auto" -- "$cur")
		return ;;
	--sandbox)
		mapfile -t COMPREPLY < <(compgen -W "jail none" -- "$cur")
		return ;;
	--llm)
		mapfile -t COMPREPLY < <(compgen -W "openai: anthropic: replay:" -- "$cur")
		return ;;
	--eval)
		mapfile -t COMPREPLY < <(compgen -W "stark-eval replay:" -- "$cur")
		return ;;
	--run-id | --bench-id | --budget | --model | --set | --node | --seed | --trials | --timeout | \
		--min-reps | --target-rse | --placements | --jobs | --runs-in-flight | --llm-in-flight | \
		--evals-per-device | --max-dollars | --level)
		return ;;
	esac
	case "$cmd" in
	eval)
		opts="--device --json --trials --seed --timeout --no-timing --min-reps --target-rse
		      --placements --l2-flush --verdict --cache --stage --sandbox --insecure-sandbox
		      --batch --jobs --gpu-lock --language --precision --baseline --help" ;;
	run)
		opts="--run-id --budget --policy --llm --model --device --store --config --set --eval
		      --format --language --precision --baseline --insecure-sandbox --help" ;;
	bench)
		opts="--bench-id --policies --budget --llm --model --device --runs-in-flight
		      --llm-in-flight --evals-per-device --max-dollars --baseline --level --eval --format
		      --store --config --set --insecure-sandbox --help" ;;
	resume)
		opts="--store --dry-run --config --set --max-dollars --accept-upgrade"
		ids=all ;;
	show)
		opts="--node --json --csv --problems --store"
		ids=all ;;
	export)
		opts="-o --node --fastest --responses --results --journal --store"
		ids=runs ;;
	report)
		opts="-o --store"
		ids=all ;;
	list) opts="--store --json" ;;
	doctor) opts="--device --json --help" ;;
	version) opts="--json --help" ;;
	*) return ;;
	esac
	if [[ "$cur" == -* ]]; then
		mapfile -t COMPREPLY < <(compgen -W "$opts" -- "$cur")
	elif [ -n "$ids" ]; then
		mapfile -t COMPREPLY < <(compgen -W "$(_stark_ids "$ids")" -- "$cur")
	else
		mapfile -t COMPREPLY < <(compgen -f -- "$cur")
	fi
}
complete -o filenames -F _stark stark

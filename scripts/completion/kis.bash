# SPDX-License-Identifier: MIT
# bash completion for `kis sandbox`: verbs and flags read from the binary's
# own --help (one source, as the man pages), ids of bases, workspaces and
# sessions read from the store the command line names (--store-root) or
# the default one. Installed by `make install` as
# $(PREFIX)/share/bash-completion/completions/kis.
# COMPREPLY=($(compgen ...)) splits on purpose: compgen prints a word a line.
# shellcheck disable=SC2207

_kis_ids() { # KIND(base|workspace|session) KIS [STORE-ROOT]
	local kind=$1 kis=$2 root=$3
	local -a sr=()
	[[ -n $root ]] && sr=(--store-root "$root")
	# the table's first column, without its heading
	"$kis" sandbox "$kind" list "${sr[@]}" 2>/dev/null | awk 'NR > 1 { print $1 }'
}

_kis_choices() { # KIS FLAG: the values FLAG takes, as `kis sandbox run --help`
	# lists them ("--tier auto|process|..."): the help writes them from the
	# library's own tables (src/core/names.c, the backends' registry), so
	# no list of tiers, network modes or backends is kept here
	"$1" sandbox run --help 2>/dev/null |
		awk -v f="$2" '$1 == f && $2 ~ /[|]/ { gsub(/[|]/, " ", $2); print $2; exit }'
}

_kis() {
	local cur=${COMP_WORDS[COMP_CWORD]} prev=
	((COMP_CWORD > 0)) && prev=${COMP_WORDS[COMP_CWORD - 1]}
	local kis=${COMP_WORDS[0]}
	COMPREPLY=()
	if ((COMP_CWORD == 1)); then
		COMPREPLY=($(compgen -W "sandbox --help --version" -- "$cur"))
		return
	fi
	[[ ${COMP_WORDS[1]} == sandbox ]] || return
	if ((COMP_CWORD == 2)); then
		local verbs
		verbs=$("$kis" sandbox --help 2>/dev/null | awk '/^Verbs:/ { v = 1; next } v && /^  [a-z]/ { print $1 } v && /^$/ { v = 0 }')
		COMPREPLY=($(compgen -W "$verbs --help --version" -- "$cur"))
		return
	fi
	local verb=${COMP_WORDS[2]} sub='' root='' i
	for ((i = 3; i < COMP_CWORD; i++)); do
		case ${COMP_WORDS[i]} in
		--) # the command: complete it as a command, then its files
			if ((i == COMP_CWORD - 1)); then
				COMPREPLY=($(compgen -c -- "$cur"))
			else
				COMPREPLY=($(compgen -f -- "$cur"))
			fi
			return ;;
		--store-root) root=${COMP_WORDS[i + 1]} ;;
		--store-root=*) root=${COMP_WORDS[i]#--store-root=} ;;
		esac
	done
	local subs=
	case $verb in
	session) subs="list destroy create exec shell" ;;
	base) subs="import list remove" ;;
	workspace) subs="list path" ;;
	guest) subs="fetch status path" ;;
	esac
	if [[ -n $subs ]]; then
		if ((COMP_CWORD == 3)); then
			COMPREPLY=($(compgen -W "$subs --help" -- "$cur"))
			return
		fi
		sub=${COMP_WORDS[3]}
	fi
	case $prev in
	--base) COMPREPLY=($(compgen -W "$(_kis_ids base "$kis" "$root")" -- "$cur")); return ;;
	--workspace) COMPREPLY=($(compgen -W "$(_kis_ids workspace "$kis" "$root")" -- "$cur")); return ;;
	--store-root | --dir) COMPREPLY=($(compgen -d -- "$cur")); return ;;
	--profile) COMPREPLY=($(compgen -f -- "$cur")); return ;;
	--tier | --backend | --net | --root)
		COMPREPLY=($(compgen -W "$(_kis_choices "$kis" "$prev")" -- "$cur")); return ;;
	--strategy) COMPREPLY=($(compgen -W "auto reflink overlay copy" -- "$cur")); return ;;
	--accel) COMPREPLY=($(compgen -W "auto kvm tcg" -- "$cur")); return ;;
	esac
	if [[ $cur == -* ]]; then
		local flags
		flags=$("$kis" sandbox "$verb" ${sub:+"$sub"} --help 2>/dev/null | grep -oE -- '--[a-z][a-z-]*' | sort -u)
		COMPREPLY=($(compgen -W "$flags --help --quiet" -- "$cur"))
		return
	fi
	# the positional argument: an id of the kind the verb names
	local first=$(( ${#subs} ? 4 : 3 ))
	((COMP_CWORD == first)) || [[ $verb$sub == baseimport ]] || return
	case $verb$sub in
	clone | baseremove) COMPREPLY=($(compgen -W "$(_kis_ids base "$kis" "$root")" -- "$cur")) ;;
	destroy | workspacepath) COMPREPLY=($(compgen -W "$(_kis_ids workspace "$kis" "$root")" -- "$cur")) ;;
	exec | shell | sessiondestroy | sessionexec | sessionshell) COMPREPLY=($(compgen -W "$(_kis_ids session "$kis" "$root")" -- "$cur")) ;;
	baseimport) COMPREPLY=($(compgen -d -- "$cur")) ;;
	esac
}
complete -F _kis kis

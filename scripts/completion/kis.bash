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

_kis_choices() { # FLAG KIS ARGS...: the values FLAG takes, as `KIS ARGS --help`
	# lists them: "--tier auto|process|...", "--accel A  auto|kvm|tcg: ...",
	# "[--strategy auto|reflink|...]" (the first word after FLAG that holds
	# a '|'). The help writes the tiers, network modes, backends and log
	# levels from the library's own tables (src/core/names.c, the backends'
	# registry, src/core/log.c), so no list of values is kept here.
	local f=$1
	shift
	"$@" --help 2>/dev/null |
		awk -v f="$f" '{
			for (j = 1; j <= NF; j++) {
				w = $j; sub(/^\[/, "", w); sub(/=.*/, "", w)
				if (w != f) continue
				for (k = j + 1; k <= j + 2 && k <= NF; k++)
					if ($k ~ /[|]/) {
						v = $k; gsub(/[\[\]:,()]/, "", v); gsub(/[|]/, " ", v)
						print v; exit
					}
			}
		}'
}

_kis_mount_ids() { # KIS STORE-ROOT: "ID:" for every base and workspace
	local id
	for id in $(_kis_ids base "$1" "$2") $(_kis_ids workspace "$1" "$2"); do
		printf '%s:\n' "$id"
	done
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
	--log-level) # a global flag: its levels are in `kis --help`
		COMPREPLY=($(compgen -W "$(_kis_choices "$prev" "$kis")" -- "$cur")); return ;;
	--mount) # ID:TARGET[:ro]: the ids first, then the target is the user's
		if [[ $cur != *:* ]]; then
			COMPREPLY=($(compgen -W "$(_kis_mount_ids "$kis" "$root")" -- "$cur"))
			((${#COMPREPLY[@]})) && compopt -o nospace 2>/dev/null
		fi
		return ;;
	--*) # an enum flag of this verb: its values, as its help lists them
		local vals
		vals=$(_kis_choices "$prev" "$kis" sandbox "$verb" ${sub:+"$sub"})
		if [[ -n $vals ]]; then
			COMPREPLY=($(compgen -W "$vals" -- "$cur"))
			return
		fi ;;
	esac
	if [[ $cur == -* ]]; then
		local flags
		flags=$("$kis" sandbox "$verb" ${sub:+"$sub"} --help 2>/dev/null | grep -oE -- '--[a-z][a-z-]*' | sort -u)
		COMPREPLY=($(compgen -W "$flags --help --quiet --log-level" -- "$cur"))
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

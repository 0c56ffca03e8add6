_saltsight() {
    local i cur prev opts cmd
    COMPREPLY=()
    if [[ "${BASH_VERSINFO[0]}" -ge 4 ]]; then
        cur="$2"
    else
        cur="${COMP_WORDS[COMP_CWORD]}"
    fi
    prev="$3"
    cmd=""
    opts=""

    for i in "${COMP_WORDS[@]:0:COMP_CWORD}"
    do
        case "${cmd},${i}" in
            ",$1")
                cmd="saltsight"
                ;;
            saltsight,capture)
                cmd="saltsight__subcmd__capture"
                ;;
            saltsight,check-config)
                cmd="saltsight__subcmd__check__subcmd__config"
                ;;
            saltsight,demo)
                cmd="saltsight__subcmd__demo"
                ;;
            saltsight,failures)
                cmd="saltsight__subcmd__failures"
                ;;
            saltsight,help)
                cmd="saltsight__subcmd__help"
                ;;
            saltsight,job)
                cmd="saltsight__subcmd__job"
                ;;
            saltsight,jobs)
                cmd="saltsight__subcmd__jobs"
                ;;
            saltsight,minion)
                cmd="saltsight__subcmd__minion"
                ;;
            saltsight,replay)
                cmd="saltsight__subcmd__replay"
                ;;
            saltsight,run)
                cmd="saltsight__subcmd__run"
                ;;
            saltsight,tail)
                cmd="saltsight__subcmd__tail"
                ;;
            saltsight,top)
                cmd="saltsight__subcmd__top"
                ;;
            saltsight__subcmd__help,capture)
                cmd="saltsight__subcmd__help__subcmd__capture"
                ;;
            saltsight__subcmd__help,check-config)
                cmd="saltsight__subcmd__help__subcmd__check__subcmd__config"
                ;;
            saltsight__subcmd__help,demo)
                cmd="saltsight__subcmd__help__subcmd__demo"
                ;;
            saltsight__subcmd__help,failures)
                cmd="saltsight__subcmd__help__subcmd__failures"
                ;;
            saltsight__subcmd__help,help)
                cmd="saltsight__subcmd__help__subcmd__help"
                ;;
            saltsight__subcmd__help,job)
                cmd="saltsight__subcmd__help__subcmd__job"
                ;;
            saltsight__subcmd__help,jobs)
                cmd="saltsight__subcmd__help__subcmd__jobs"
                ;;
            saltsight__subcmd__help,minion)
                cmd="saltsight__subcmd__help__subcmd__minion"
                ;;
            saltsight__subcmd__help,replay)
                cmd="saltsight__subcmd__help__subcmd__replay"
                ;;
            saltsight__subcmd__help,run)
                cmd="saltsight__subcmd__help__subcmd__run"
                ;;
            saltsight__subcmd__help,tail)
                cmd="saltsight__subcmd__help__subcmd__tail"
                ;;
            saltsight__subcmd__help,top)
                cmd="saltsight__subcmd__help__subcmd__top"
                ;;
            *)
                ;;
        esac
    done

    case "${cmd}" in
        saltsight)
            opts="-h --config.file --log.level --log.format --help run tail top capture replay check-config demo job jobs failures minion help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 1 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --config.file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --log.level)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --log.format)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        saltsight__subcmd__capture)
            opts="-h --wait --duration --bus.master-config --bus.endpoint --bus.max-frame-bytes --config.file --log.level --log.format --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --duration)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --bus.master-config)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --bus.endpoint)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --bus.max-frame-bytes)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --config.file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --log.level)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --log.format)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        saltsight__subcmd__check__subcmd__config)
            opts="-h --example --no-environment --bus.master-config --bus.endpoint --bus.max-frame-bytes --web.listen-address --web.config.file --state.dir --config.file --log.level --log.format --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --bus.master-config)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --bus.endpoint)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --bus.max-frame-bytes)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --web.listen-address)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --web.config.file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --state.dir)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --config.file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --log.level)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --log.format)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        saltsight__subcmd__demo)
            opts="-h --events --json --keep --format --config.file --log.level --log.format --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --format)
                    COMPREPLY=($(compgen -W "json text" -- "${cur}"))
                    return 0
                    ;;
                --config.file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --log.level)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --log.format)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        saltsight__subcmd__failures)
            opts="-h --since --state.dir --json --config.file --log.level --log.format --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --since)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --state.dir)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --config.file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --log.level)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --log.format)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        saltsight__subcmd__help)
            opts="run tail top capture replay check-config demo job jobs failures minion help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        saltsight__subcmd__help__subcmd__capture)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        saltsight__subcmd__help__subcmd__check__subcmd__config)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        saltsight__subcmd__help__subcmd__demo)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        saltsight__subcmd__help__subcmd__failures)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        saltsight__subcmd__help__subcmd__help)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        saltsight__subcmd__help__subcmd__job)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        saltsight__subcmd__help__subcmd__jobs)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        saltsight__subcmd__help__subcmd__minion)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        saltsight__subcmd__help__subcmd__replay)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        saltsight__subcmd__help__subcmd__run)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        saltsight__subcmd__help__subcmd__tail)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        saltsight__subcmd__help__subcmd__top)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        saltsight__subcmd__job)
            opts="-h --state.dir --json --config.file --log.level --log.format --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --state.dir)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --config.file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --log.level)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --log.format)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        saltsight__subcmd__jobs)
            opts="-h --since --failed --fun --user --state.dir --json --config.file --log.level --log.format --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --since)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --fun)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --user)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --state.dir)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --config.file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --log.level)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --log.format)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        saltsight__subcmd__minion)
            opts="-h --jobs --state.dir --json --config.file --log.level --log.format --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --jobs)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --state.dir)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --config.file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --log.level)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --log.format)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        saltsight__subcmd__replay)
            opts="-h --output --format --bus.master-config --bus.max-frame-bytes --config.file --log.level --log.format --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --output)
                    COMPREPLY=($(compgen -W "config stdout none" -- "${cur}"))
                    return 0
                    ;;
                --format)
                    COMPREPLY=($(compgen -W "json text" -- "${cur}"))
                    return 0
                    ;;
                --bus.master-config)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --bus.max-frame-bytes)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --config.file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --log.level)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --log.format)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        saltsight__subcmd__run)
            opts="-h --output --format --allow-root --bus.master-config --bus.endpoint --bus.max-frame-bytes --web.listen-address --web.config.file --state.dir --config.file --log.level --log.format --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --output)
                    COMPREPLY=($(compgen -W "config stdout none" -- "${cur}"))
                    return 0
                    ;;
                --format)
                    COMPREPLY=($(compgen -W "json text" -- "${cur}"))
                    return 0
                    ;;
                --bus.master-config)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --bus.endpoint)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --bus.max-frame-bytes)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --web.listen-address)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --web.config.file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --state.dir)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --config.file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --log.level)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --log.format)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        saltsight__subcmd__tail)
            opts="-h --wait --json --tag --from --count --no-redact --bus.master-config --bus.endpoint --bus.max-frame-bytes --config.file --log.level --log.format --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --tag)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --from)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --count)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --bus.master-config)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --bus.endpoint)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --bus.max-frame-bytes)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --config.file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --log.level)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --log.format)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        saltsight__subcmd__top)
            opts="-h --wait --bus.master-config --bus.endpoint --bus.max-frame-bytes --config.file --log.level --log.format --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --bus.master-config)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --bus.endpoint)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --bus.max-frame-bytes)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --config.file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --log.level)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --log.format)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
    esac
}

if [[ "${BASH_VERSINFO[0]}" -eq 4 && "${BASH_VERSINFO[1]}" -ge 4 || "${BASH_VERSINFO[0]}" -gt 4 ]]; then
    complete -F _saltsight -o nosort -o bashdefault -o default saltsight
else
    complete -F _saltsight -o bashdefault -o default saltsight
fi

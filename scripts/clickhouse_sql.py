"""Splits a .sql file of packaging/clickhouse/ into statements, as the Rust tests
do (tests/it/support/clickhouse.rs): a statement ends at a ';' outside a string,
a quoted name and a comment; comments ('-- ...' to the end of the line, and
'/* ... */') are dropped, so a ';' inside one splits nothing."""


def statements(text):
    out, cur, i, n = [], [], 0, len(text)
    while i < n:
        c = text[i]
        if c == "-" and text.startswith("--", i):
            end = text.find("\n", i)
            i = n if end < 0 else end
        elif c == "/" and text.startswith("/*", i):
            end = text.find("*/", i + 2)
            i = n if end < 0 else end + 2
            cur.append(" ")
        elif c in "'\"`":
            j = i + 1
            while j < n:
                if text[j] == "\\":
                    j += 2
                elif text[j] == c and text.startswith(c + c, j):
                    j += 2  # a doubled quote stands for one
                elif text[j] == c:
                    break
                else:
                    j += 1
            cur.append(text[i : j + 1])
            i = j + 1
        elif c == ";":
            out.append("".join(cur))
            cur = []
            i += 1
        else:
            cur.append(c)
            i += 1
    out.append("".join(cur))
    return [s.strip() for s in out if s.strip()]

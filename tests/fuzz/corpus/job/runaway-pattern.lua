return { name = ('a?'):rep(30)..('a'):rep(30):find(('a?'):rep(30)..('a'):rep(30)) }

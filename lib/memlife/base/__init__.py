"""What every other place needs, and nothing more: where files live, which profile runs, how work
is shown and spread over cores, how tables and figures are written, and how a plug-in is found.

- `paths`: the repository's folders and a profile's results layout; file hashes; the data files
  installed wheels ship (located, never imported).
- `config`: profiles (configs/<profile>.yaml, `extends:` chains, checks that name the key), the
  roles and endpoint fields a profile's `models:` may set, which notebook belongs to which track.
- `progress`: progress bars, notices and the kernel log a notebook run leaves.
- `parallel`: work spread over processes with bounded workers.
- `artifacts`: saving tables and figures byte-stable (headless matplotlib, fixed metadata).
- `plugins`: naming a system or policy of one's own as "module:attr" in a profile; the source
  files such names point at, for the runner's fingerprints.
- `derived`: what is derived from an installed data file (ShareGPT's task chat, tokenized), kept
  on disk so that each process does not derive it again.
- `moved`: modules and command lines that moved, and the error that names where they went.

Imports: nothing else of memlife. Every place above may import it.
"""

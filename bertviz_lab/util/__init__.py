"""What every package of bertviz_lab may use and that belongs to none of them: files read and written safely
(`files`: size limits, atomic writes, one writer per folder), typed config fields (`fields`), one-line reasons a
path cannot be written (`paths`), torchrun's process group (`distributed`) and Ctrl-C/SIGTERM handlers
(`interrupts`). It imports nothing else of the package."""

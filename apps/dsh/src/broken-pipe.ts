/**
 * `dsh show x | head`: once the reader closes the pipe, the rest of the
 * output has nowhere to go. That is the reader's choice, not a failure, so
 * the CLI drops the remaining output and carries on quietly: no stack, no
 * message, and the command's own exit status (0 when it succeeded). A
 * command that writes (`run`, `import`, `demo`) is never cut short by a
 * closed pipe; it finishes its work, only unheard. Exiting 0 rather than the
 * SIGPIPE convention 141 keeps `set -o pipefail` pipelines such as
 * `dsh sessions | head` successful.
 *
 * Any other write error on stdout or stderr (a full disk behind `> file`)
 * is reported on stderr when stderr still works, and the exit status becomes 1.
 */
export function quietOnBrokenPipe(stream: NodeJS.WriteStream, report: (message: string) => void): void {
  stream.on('error', (error: NodeJS.ErrnoException) => {
    if (error.code === 'EPIPE' || error.code === 'ERR_STREAM_DESTROYED') return
    process.exitCode = 1
    report(`dsh: cannot write output (${error.code ?? error.message}).\n`)
  })
}

let stderrGuarded = false

/**
 * `process.stderr` with the guard above installed, at its first use: the
 * stream is made when first touched, and making it for a pipe loads
 * node:net (a listing that prints nothing on stderr never pays for it).
 */
export function guardedStderr(): NodeJS.WriteStream {
  const stream = process.stderr
  if (!stderrGuarded) {
    stderrGuarded = true
    quietOnBrokenPipe(stream, () => {})
  }
  return stream
}

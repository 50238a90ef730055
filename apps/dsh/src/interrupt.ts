import { readFile, writeFile } from 'node:fs/promises'
import type { CommandIo } from './command.js'

/** What `untilInterrupted` resolves: the work's value, or the signal that cancelled it. */
export type Interruptible<T> = { readonly done: T } | { readonly interrupted: 'SIGINT' | 'SIGTERM' }

/**
 * Runs `work` with a signal that the first SIGINT (Ctrl-C) or SIGTERM
 * aborts, so a long job that writes files (a rebuild, an export) stops
 * through its own cancellation and removes what it wrote, instead of the
 * process dying mid-write. On the signal it says `notice` (the CLI's own
 * text; data in it escaped by the caller) on stderr, once, as one line. Each handler is taken once: a second Ctrl-C finds none, and
 * quits at once as Node does by default. When the signal arrived and the
 * work then fails, that is the cancellation; work that completes anyway
 * resolves its value.
 */
export async function untilInterrupted<T>(
  io: CommandIo,
  notice: string,
  work: (signal: AbortSignal) => Promise<T>,
): Promise<Interruptible<T>> {
  const controller = new AbortController()
  let received: 'SIGINT' | 'SIGTERM' | undefined
  const on = (name: 'SIGINT' | 'SIGTERM') => (): void => {
    if (received !== undefined) return
    received = name
    // On a terminal the line starts below the echoed ^C and any progress bar.
    const start = io.err.isTTY === true ? '\n' : ''
    io.err.write(`${start}dsh: ${name === 'SIGINT' ? 'interrupted' : 'terminated'}: ${notice} (Ctrl-C again to quit at once)\n`)
    controller.abort()
  }
  const onInterrupt = on('SIGINT')
  const onTerminate = on('SIGTERM')
  process.once('SIGINT', onInterrupt)
  process.once('SIGTERM', onTerminate)
  try {
    return { done: await work(controller.signal) }
  } catch (error) {
    if (received !== undefined) return { interrupted: received }
    throw error
  } finally {
    process.off('SIGINT', onInterrupt)
    process.off('SIGTERM', onTerminate)
  }
}

/** The exit status of a command cancelled by `signal`: 128 + its number, as a shell reports it (SIGINT 130, SIGTERM 143). */
export function interruptedStatus(signal: 'SIGINT' | 'SIGTERM'): number {
  return signal === 'SIGINT' ? 130 : 143
}

/**
 * A test's hold (`DSH_REINDEX_HOLD`, `DSH_EXPORT_HOLD`): says `held` through
 * the FIFO (its reader sees the job waiting), then waits for a word back.
 */
export async function holdAt(fifo: string): Promise<void> {
  await writeFile(fifo, 'held\n')
  await readFile(fifo)
}

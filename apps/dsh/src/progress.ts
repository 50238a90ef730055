import { escapeTerminal } from '@dsh/context'

/**
 * Progress for long jobs: a redrawn bar on a TTY, nothing otherwise (so logs
 * and `--json` output stay clean). The label is data (a session id) and is
 * escaped like every other printed text.
 */
export interface Progress {
  update(done: number, total: number, label?: string): void
  done(): void
}

export function createProgress(stream: (NodeJS.WritableStream & { isTTY?: boolean }) | undefined): Progress {
  if (stream === undefined || stream.isTTY !== true) return { update: () => {}, done: () => {} }
  let last = 0
  let drawn = false
  return {
    update(done, total, label = '') {
      const now = Date.now()
      if (done < total && now - last < 50) return
      last = now
      const width = 30
      const ratio = total === 0 ? 1 : Math.min(1, done / total)
      const filled = Math.round(ratio * width)
      stream.write(`\r[${'#'.repeat(filled)}${'-'.repeat(width - filled)}] ${done}/${total} ${escapeTerminal(label)}`.padEnd(70))
      drawn = true
    },
    done() {
      if (drawn) stream.write('\n')
      drawn = false
    },
  }
}

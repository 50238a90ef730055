// A rebuild process: builds the index of a JSONL root into a new generation
// (what `dsh reindex` runs) and stops in the middle, where the test says:
// 'index' — once its first batch of event text is written; 'swap' — the new
// file complete and not yet published. Prints 'held' there and waits, the
// build still open, until it is killed.
// Usage: node rebuilder.mjs <root> <indexPath> <index|swap>
import { createJsonlPersistence } from '@dsh/session-persistence-jsonl'
import { buildIndexFile } from '@dsh/session-query-sqlite'

const [root, path, point] = process.argv.slice(2)
const silent = { warn: () => {}, error: () => {} }

/** Blocks this thread for good (no CPU spent): the build stays exactly where it is. */
function holdHere() {
  process.stdout.write('held\n')
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0)
}

await buildIndexFile({
  persistence: createJsonlPersistence({ root, readOnly: true }),
  path,
  logger: silent,
  onProgress: (progress) => {
    if (point === 'index' && progress.phase === 'index' && progress.done > 0) holdHere()
  },
  beforeSwap: async () => {
    if (point === 'swap') holdHere()
  },
})
process.stdout.write('published\n')

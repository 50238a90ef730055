import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createJsonlPersistence, type JsonlCompression } from '@dsh/session-persistence-jsonl'
import { sessionQueryContractSuite } from '@dsh/session-query/testing'
import { createSqliteSessionQuery, defaultIndexPath } from '../src/index.js'

for (const compression of ['zstd', 'none'] as const satisfies readonly JsonlCompression[]) {
  const roots = new Map<object, string>()
  sessionQueryContractSuite(`sqlite index over jsonl persistence (${compression}), index inside the root`, {
    corruptible: true,
    search: true,
    async createPersistence() {
      const root = mkdtempSync(join(tmpdir(), 'dsh-query-sqlite-jsonl-'))
      const persistence = createJsonlPersistence({ root, compression })
      roots.set(persistence, root)
      return {
        persistence,
        async corrupt(id) {
          // The last byte belongs to the trailer of the last committed batch: a CRC failure.
          const file = persistence.logPath(id)
          const bytes = readFileSync(file)
          bytes[bytes.length - 1]! ^= 0xff
          writeFileSync(file, bytes)
        },
        async cleanup() {
          await persistence.close()
          rmSync(root, { recursive: true, force: true })
        },
      }
    },
    // The index lives under the session root (`<root>/.dsh/`), which the jsonl backend never lists.
    openQuery: (sources) =>
      createSqliteSessionQuery({
        ...sources,
        path: defaultIndexPath(roots.get(sources.persistence)!),
        logger: { warn: () => {}, error: () => {} },
      }),
  })
}

import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createJsonlPersistence, type JsonlCompression } from '@dsh/session-persistence-jsonl'
import { sessionQueryContractSuite } from '../src/contract-suite.js'
import { createSessionQuery } from '../src/index.js'

for (const compression of ['zstd', 'none'] as const satisfies readonly JsonlCompression[]) {
  sessionQueryContractSuite(`in-memory query over jsonl persistence (${compression})`, {
    corruptible: true,
    async createPersistence() {
      const root = mkdtempSync(join(tmpdir(), 'dsh-query-jsonl-'))
      const persistence = createJsonlPersistence({ root, compression })
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
    openQuery: (sources) => createSessionQuery(sources),
  })
}

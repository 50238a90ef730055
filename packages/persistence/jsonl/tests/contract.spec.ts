import { appendFileSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import type { SessionPersistence } from '@dsh/session-persistence'
import {
  describePersistenceContract,
  type PersistenceContractFactoryOptions,
  type PersistenceContractHarness,
} from '@dsh/session-persistence/testing'
import { createJsonlPersistence, JOURNAL_FILE, type JsonlCompression, type JsonlPersistence } from '@dsh/session-persistence-jsonl'
import { flushWriters, JournalWriter } from '../src/change-journal.js'
import { createCodec } from '../src/codec.js'
import { scanLog } from '../src/log-scan.js'
import { attachmentFiles } from './attachment-files.js'
import { tempDir } from './helpers.js'

/** What a crash leaves after the committed end: the start of a batch that was never completed. */
const TORN = {
  zstd: Buffer.from([0x28, 0xb5, 0x2f, 0xfd, 0x64, 0x00, 0x01, 0x45, 0x03]),
  none: Buffer.from('{"type":"assistant/chunk","seq":'),
}

function harness(compression: JsonlCompression) {
  return (options?: PersistenceContractFactoryOptions): PersistenceContractHarness => {
    const owned = options?.root === undefined ? tempDir() : undefined
    const root = options?.root ?? owned!.dir
    const instances: JsonlPersistence[] = [createJsonlPersistence({ root, compression })]
    const logPath = (id: string): string => instances[0]!.logPath(id)
    return {
      get persistence(): SessionPersistence {
        return instances[0]!
      },
      root,
      async reopen() {
        await instances.at(-1)!.close()
        const next = createJsonlPersistence({ root, compression })
        instances.push(next)
        return next
      },
      async cleanup() {
        for (const instance of instances) await instance.close()
        if (owned) rmSync(owned.dir, { recursive: true, force: true })
      },
      async storedAttachments() {
        return attachmentFiles(root)
      },
      async tearTail(id) {
        appendFileSync(logPath(id), TORN[compression])
      },
      async pruneFeed() {
        // The held `end` records of this process's writers first, as any compactor reads them.
        flushWriters(join(root, JOURNAL_FILE))
        const journal = new JournalWriter(root)
        try {
          if (!journal.compact()) throw new Error(`the change journal of ${root} was not compacted`)
        } finally {
          journal.close()
        }
      },
      async damageBatch(id, seq) {
        const file = logPath(id)
        const buf = readFileSync(file)
        const scan = await scanLog(buf, createCodec(compression), file)
        const batch = scan.batches.find((b) => b.trailer.firstSeq <= seq && seq < b.trailer.firstSeq + b.trailer.count)
        if (batch === undefined) throw new Error(`no committed batch of ${id} holds event ${seq}`)
        buf[(batch.bodyStart + batch.bodyEnd) >> 1]! ^= 0x5a
        writeFileSync(file, buf)
      },
    }
  }
}

describePersistenceContract('jsonl (zstd)', harness('zstd'))
describePersistenceContract('jsonl (none)', harness('none'))

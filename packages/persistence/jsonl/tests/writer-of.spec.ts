import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { type SessionId, SessionLogOffset, SessionSeq, type StoredSessionEvent } from '@dsh/session'
import { withSharedReads } from '@dsh/session-persistence'
import { headerOf } from '@dsh/test-kit'
import { afterEach, beforeEach, expect, it } from 'vitest'
import { createJsonlPersistence } from '../src/index.js'

let root: string
beforeEach(() => {
  root = mkdtempSync(join(tmpdir(), 'dsh-writer-of-'))
})
afterEach(() => rmSync(root, { recursive: true, force: true }))

const event = { type: 'user/message', seq: SessionSeq(0), time: 1, data: { text: 'hi' } } as StoredSessionEvent

it("names the live process holding a session's writer lock, and none before its first write or once it is released", async () => {
  const writer = createJsonlPersistence({ root })
  const reader = createJsonlPersistence({ root, readOnly: true })
  expect(await reader.writerOf('s' as SessionId)).toBeUndefined()
  await writer.append({ header: headerOf('s'), inheritedEventCount: SessionLogOffset(0) }, [event])
  expect(await reader.writerOf('s' as SessionId)).toEqual({ pid: process.pid, host: expect.any(String) })
  // The shared-reads wrapper a host puts around its backend passes the probe through.
  expect(await withSharedReads(reader).writerOf?.('s' as SessionId)).toEqual({ pid: process.pid, host: expect.any(String) })
  await writer.close()
  expect(await reader.writerOf('s' as SessionId)).toBeUndefined()

  await reader.close()
})

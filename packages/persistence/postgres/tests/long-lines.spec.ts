import { crc32 } from 'node:zlib'
import { SessionId } from '@dsh/session'
import { ELIDED_EVENT_TYPE, LINE_MAX_BYTES } from '@dsh/session-persistence/backend'
import { createPostgresPersistence, type PostgresPersistence } from '@dsh/session-persistence-postgres'
import { keyOf } from '@dsh/session-persistence-postgres/backend'
import { freshDatabase } from '@dsh/session-persistence-postgres/testing/vitest'
import type pg from 'pg'
import { afterEach, describe, expect, it } from 'vitest'
import { compress } from 'zstd-napi'
import { events, target } from './fixtures.js'

// A batch row holding a line over LINE_MAX_BYTES (what a row written before
// the event cap, or by another writer, may hold; no append writes one) is
// read a chunk at a time: the line comes back as an elided event, the lines
// around it whole, from `inspect` and from a range read alike.

const cleanups: Array<() => unknown> = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

async function open(pool: pg.Pool): Promise<PostgresPersistence> {
  const persistence = await createPostgresPersistence({ pool })
  cleanups.push(() => persistence.close())
  return persistence
}

/** Commits, by hand, a batch row of `lines` (whole JSON lines) after the stored ones of session `id`. */
async function insertBatch(pool: pg.Pool, id: string, firstSeq: number, lines: Buffer[]): Promise<number> {
  const plain = Buffer.concat(lines.flatMap((line) => [line, Buffer.from('\n')]))
  const { rows } = await pool.query<{ sid: string }>('SELECT sid FROM dsh_sessions WHERE id_key = $1', [keyOf(id)])
  const sid = rows[0]!.sid
  await pool.query(
    'INSERT INTO dsh_batches (id_key, sid, first_seq, count, plain_length, checksum, body) VALUES ($7, $1, $2, $3, $4, $5, $6)',
    [sid, firstSeq, lines.length, plain.length, crc32(plain) | 0, compress(plain, { compressionLevel: 1 }), keyOf(id)],
  )
  await pool.query('UPDATE dsh_sessions SET next_seq = $2 WHERE id_key = $3 AND sid = $1', [sid, firstSeq + lines.length, keyOf(id)])
  return plain.length
}

/** An event line whose text is `bytes` of 'x' (built as bytes, never as one string). */
function line(seq: number, type: string, bytes: number): Buffer {
  return Buffer.concat([
    Buffer.from(`{"type":"${type}","seq":${seq},"time":${1000 + seq},"data":{"text":"`),
    Buffer.alloc(bytes, 'x'),
    Buffer.from('"}}'),
  ])
}

describe('a stored line over LINE_MAX_BYTES', () => {
  it('comes back elided with its size and type; the lines of its batch around it come back whole', async () => {
    const db = await freshDatabase()
    cleanups.push(() => db.end())
    const writer = await open(db.pool)
    const id = SessionId('pg-long-line')
    await writer.append(target(id), events(0, 2, id))
    const long = line(3, 'assistant/message', LINE_MAX_BYTES + 1024 * 1024)
    await insertBatch(db.pool, id, 2, [line(2, 'user/message', 10), long, line(4, 'user/message', 20)])
    await writer.close()
    const reader = await open(db.pool)
    const whole = await reader.inspect(id)
    expect(whole.events.map((e) => [e.seq, e.type])).toEqual([
      [0, 'user/message'],
      [1, 'user/message'],
      [2, 'user/message'],
      [3, ELIDED_EVENT_TYPE],
      [4, 'user/message'],
    ])
    expect(whole.events[3]).toEqual({
      type: ELIDED_EVENT_TYPE,
      seq: 3,
      time: 1003,
      data: { elided: { bytes: long.length, reason: 'line-too-large', type: 'assistant/message' } },
    })
    expect((whole.events[4]!.data as { text: string }).text).toBe('x'.repeat(20))
    const page = await reader.inspectRange(id, { limit: 2 })
    expect(page.events).toEqual(whole.events.slice(3))
  })

  it('a long batch that does not match its row (length, checksum) is CORRUPT, never returned short', async () => {
    const db = await freshDatabase()
    cleanups.push(() => db.end())
    const writer = await open(db.pool)
    const id = SessionId('pg-long-corrupt')
    await writer.append(target(id), events(0, 1, id))
    await insertBatch(db.pool, id, 1, [line(1, 'assistant/message', LINE_MAX_BYTES + 1024)])
    await db.pool.query('UPDATE dsh_batches SET checksum = checksum # 1 WHERE first_seq = 1')
    await writer.close()
    const reader = await open(db.pool)
    await expect(reader.inspect(id)).rejects.toMatchObject({ code: 'SESSION_PERSISTENCE_CORRUPT' })
  })
})

import { Context } from '@dsh/context'
import { CURSOR_MAX_LENGTH, ID_MAX_LENGTH, listSessionsQuery } from '@dsh/protocol'
import { SessionStore } from '@dsh/session'
import { expect, it } from 'vitest'
import { createSessionQuery } from '../src/index.js'

it('paging past the longest ids issues cursors the wire takes: within CURSOR_MAX_LENGTH, through the listing query', async () => {
  const ctx = new Context({ logger: { warn: () => {}, error: () => {} } })
  const sessions = new SessionStore(ctx)
  // The ids whose cursors are longest: control characters escape to six bytes in JSON, CJK take three in UTF-8.
  const ids = ['\u0001'.repeat(ID_MAX_LENGTH), '中'.repeat(ID_MAX_LENGTH), `${'\u001f'.repeat(ID_MAX_LENGTH - 1)}z`]
  for (const id of ids) sessions.create({ id, createdAt: 100 })
  const query = createSessionQuery({ sessions })
  const seen: string[] = []
  let cursor: string | undefined
  do {
    const page = await query.listSessions({ limit: 1, ...(cursor === undefined ? {} : { cursor }) })
    seen.push(...page.records.map((r) => r.header.id))
    cursor = page.nextCursor
    if (cursor !== undefined) {
      expect(cursor.length).toBeGreaterThan(4096)
      expect(cursor.length).toBeLessThanOrEqual(CURSOR_MAX_LENGTH)
      expect(listSessionsQuery.parse({ cursor }).cursor).toBe(cursor)
    }
  } while (cursor !== undefined)
  expect(seen.sort()).toEqual([...ids].sort())
})

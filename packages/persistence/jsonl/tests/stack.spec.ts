import { execFileSync } from 'node:child_process'
import { Context } from '@dsh/context'
import { SessionId, sessionStorePlugin } from '@dsh/session'
import { sessionPersistencePlugin } from '@dsh/session-persistence'
import { createJsonlPersistence } from '@dsh/session-persistence-jsonl'
import { afterEach, describe, expect, it } from 'vitest'
import { tempDir } from './helpers.js'

const cleanups: Array<() => void> = []
afterEach(() => {
  for (const cleanup of cleanups.splice(0)) cleanup()
})

describe('with the coordinator: live sessions persisted to files and resumed', () => {
  for (const compression of ['zstd', 'none'] as const) {
    it(`persists, flushes, closes, then lists, loads (repairing the open turn) and resumes (${compression})`, async () => {
      const { dir: root, cleanup } = tempDir()
      cleanups.push(cleanup)
      const ctx = new Context()
      await ctx.activate(sessionStorePlugin())
      await ctx.activate(sessionPersistencePlugin(createJsonlPersistence({ root, compression })))
      const sessions = ctx.require('sessions')
      const parent = sessions.create({ id: 'parent', cwd: '/work' })
      parent.append('turn/start', { turn: 1 })
      parent.append('user/message', { text: 'hello ✓' })
      parent.append('turn/end', { turn: 1, reason: 'completed' })
      await sessions.flush(parent)
      const child = sessions.fork(parent, { childId: 'child', origin: 'subagent' })
      child.append('turn/start', { turn: 2 })
      child.append('assistant/chunk', { turn: 2, index: 0, delta: 'half an ans' })
      await ctx.dispose()

      const next = new Context()
      await next.activate(sessionStorePlugin())
      await next.activate(sessionPersistencePlugin(createJsonlPersistence({ root, compression })))
      const persistence = next.require('sessionPersistence')
      const records = await persistence.list()
      expect(records.map((r) => [r.header.id, r.inheritedEventCount, r.header.isSeeded])).toEqual([
        ['child', 3, true],
        ['parent', 0, false],
      ])
      const loaded = await persistence.load(SessionId('child'))
      expect(loaded.repaired).toBe(true)
      expect(loaded.events.map((e) => e.type)).toEqual([
        'turn/start',
        'user/message',
        'turn/end',
        'turn/start',
        'assistant/chunk',
        'turn/end',
      ])
      expect(loaded.events[5]!.data).toEqual({ turn: 2, reason: 'interrupted' })
      const resumed = next.require('sessions').restore(loaded)
      resumed.append('turn/start', { turn: 3 })
      await next.dispose()

      const reader = createJsonlPersistence({ root, compression })
      const final = await reader.inspect(SessionId('child'))
      expect(final.events.map((e) => e.seq)).toEqual([0, 1, 2, 3, 4, 5, 6])
      expect(final.inheritedEventCount).toBe(3)
      if (compression === 'zstd') {
        const lines = execFileSync('zstd', ['-dc', reader.logPath('child')], { encoding: 'utf8' })
          .trim()
          .split('\n')
        // A fork is stored by reference: its header, then only its own events (seq 3 on).
        expect(lines).toHaveLength(1 + 4)
        expect(JSON.parse(lines[0]!)).toMatchObject({ formatVersion: 4, fork: { source: 'parent', cut: 3 } })
        expect(lines.slice(1).map((l) => (JSON.parse(l) as { seq: number }).seq)).toEqual([3, 4, 5, 6])
      }
      await reader.close()
    })
  }
})

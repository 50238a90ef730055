import { join } from 'node:path'
import { createJsonlPersistence } from '@dsh/session-persistence-jsonl'
import { expect, it } from 'vitest'
import { run } from './child.js'
import { tempDir } from './helpers.js'

it('four processes writing one root while a fifth tails it: the index equals one built from nothing', { timeout: 300_000 }, async () => {
  const dir = tempDir()
  const root = join(dir, 'root')
  // The root exists before anyone reads it (the indexer opens it read-only).
  await createJsonlPersistence({ root }).close()
  const indexer = run('indexer.mjs', [root, join(dir, 'index.sqlite'), join(dir, 'fresh.sqlite')])
  // Writers start once the indexer's tailing loop runs (a handshake, not a delay).
  await indexer.printed('ready')
  const writers = ['a', 'b', 'c', 'd'].map((prefix) => run('writer.mjs', [root, prefix, '6', '8']))
  for (const writer of writers) {
    const result = await writer.done
    expect(result.stderr).toBe('')
    expect(result.code).toBe(0)
  }
  indexer.stdin.end('stop\n')
  const result = await indexer.done
  expect(result.stderr).toBe('')
  expect(result.code).toBe(0)
  const report = JSON.parse(result.stdout.trim().split('\n').at(-1)!) as {
    equal: boolean
    reconciles: number
    sources: string[]
    sessions: number
    first: number[]
    fresh: number[]
  }
  // Every reconciliation after the first build was answered by the change feed, none by a rescan.
  expect(report.sources).toEqual(['feed'])
  expect(report.sessions).toBe(24)
  // 'shared' is in every event: 4 writers × (6 sessions × 8 rounds − 8 events of the deleted session + 1 reborn).
  expect(report.fresh[0]).toBe(4 * (6 * 8 - 8 + 1))
  expect(report.first).toEqual(report.fresh)
  expect(report.equal).toBe(true)
  expect(report.reconciles).toBeGreaterThan(0)
})

import { existsSync } from 'node:fs'
import { join } from 'node:path'
import { startModelServer } from '@dsh/driver-openai/testing'
import { describe, expect, it } from 'vitest'
import { compactionEvents, conversation, model, scratch } from './support/conversation.js'
import { cleanEnv, dshRun, dshStart, history, until } from './support/dsh-process.js'

// `dsh run` stopped by a signal, resumed in a root that is not there, and
// with a budget compaction that fails: the built CLI in its own process, a
// local Chat Completions server (the only fake). A signal is sent once the
// server holds the model's answer (an order of events, not a timer).

const KEY = 'sk-e2e-93b1f7c5a0d4'
const t = scratch('dsh-run-signals-')
const env = (): NodeJS.ProcessEnv => cleanEnv({ DSH_API_KEY: KEY, DSH_STORE: '', DSH_DATABASE_URL: '' })
const dsh = (args: readonly string[]) => dshRun(args, env())

/** The JSON document among the output's lines (stderr's lines start with `dsh:`). */
const documentOf = (output: string): unknown =>
  JSON.parse(
    output
      .split('\n')
      .filter((line) => !line.startsWith('dsh: ') && line.length > 0)
      .join('\n'),
  )

describe('dsh run stopped by a signal', () => {
  for (const [signal, status] of [
    ['SIGINT', 130],
    ['SIGTERM', 143],
  ] as const) {
    for (const json of [false, true]) {
      it(`${signal}${json ? ' with --json' : ''} ends the step aborted and the turn interrupted, says so, exits ${status}`, async () => {
        t.server = await startModelServer(() => ({ kind: 'stream', content: ['partial ', 'answer', ' never'], hangAfter: 2 }))
        const running = dshStart(
          ['run', 'Think hard', '--root', t.root, '--base-url', t.server.baseURL, ...(json ? ['--json'] : [])],
          env(),
        )
        try {
          await t.server.hung()
          if (!json) await until(() => running.output().includes('partial answer'), 'the streamed text')
          running.child.kill(signal)
          expect(await running.exited, running.output()).toBe(status)
        } finally {
          running.child.kill('SIGKILL')
        }
        const output = running.output()
        let id: string
        if (json) {
          const document = documentOf(output) as { session: string; reason: string }
          expect(document).toEqual({ session: expect.any(String), reason: 'interrupted' })
          id = document.session
        } else {
          id = /^session (\S+)$/m.exec(output)![1]!
          expect(output).toContain(`dsh: ${signal === 'SIGINT' ? 'interrupting' : 'terminating'} the turn`)
          expect(output).toContain(`[turn interrupted] session ${id}`)
        }
        const events = await history(id, t.root, env())
        expect(events.filter((e) => e.type === 'assistant/chunk').map((e) => e.data.delta)).toEqual(['partial ', 'answer'])
        expect(events.slice(-2)).toMatchObject([
          { type: 'step/end', data: { finish: 'aborted' } },
          { type: 'turn/end', data: { turn: 1, reason: 'interrupted' } },
        ])
      })
    }
  }
})

describe('dsh run --resume', () => {
  it('in a missing --root is CLI_ROOT_INVALID and creates nothing (a new session may make a root)', async () => {
    const missing = join(t.dir, 'missing')
    const result = await dsh([
      'run',
      '--resume',
      '00000000-0000-4000-8000-000000000000',
      'go on',
      '--root',
      missing,
      '--base-url',
      'http://127.0.0.1:9/v1',
      '--json',
    ])
    expect(result.code, result.stderr).toBe(1)
    expect(JSON.parse(result.stdout).error.code).toBe('CLI_ROOT_INVALID')
    expect(existsSync(missing)).toBe(false)
  })
})

describe('dsh run --context-window', () => {
  it('a budget compaction whose summary the model refuses is one warning on stderr and in the JSON document; the turn goes on', async () => {
    t.server = await startModelServer(model(() => ({ kind: 'error', status: 500, message: 'the summarizer is down' })))
    const id = await conversation(t.server, t.root, env(), ['first question', 'second question'])

    // The context (five messages, about 500 tokens) is past 80% of a 200-token window: the step compacts first, and that fails.
    const args = ['--root', t.root, '--base-url', t.server.baseURL, '--context-window', '200']
    const resumed = await dsh(['run', '--resume', id, 'third question', ...args, '--json'])
    expect(resumed.code, resumed.stderr).toBe(0)
    const warnings = resumed.stderr.split('\n').filter((line) => line.length > 0)
    expect(warnings).toHaveLength(1)
    expect(warnings[0]).toMatch(
      /^dsh: warning: budget compaction failed \(the turn goes on uncompacted\): Compaction of session '[^']+' failed: .*the summarizer is down.* \(COMPACTION_SUMMARIZER_FAILED\)$/,
    )
    const document = JSON.parse(resumed.stdout) as Record<string, unknown>
    expect(document).toMatchObject({
      session: id,
      reason: 'completed',
      compactionErrors: [{ session: id, code: 'COMPACTION_SUMMARIZER_FAILED', message: expect.stringContaining('the summarizer is down') }],
    })
    const events = await history(id, t.root, env())
    expect(compactionEvents(events)).toEqual([
      ['compaction/start', undefined],
      ['compaction/end', expect.stringContaining('the summarizer is down')],
    ])
    expect(events.at(-1)).toMatchObject({ type: 'turn/end', data: { reason: 'completed' } })

    // Without --json the same warning, and stdout is the turn as usual.
    const text = await dsh(['run', '--resume', id, 'fourth question', ...args])
    expect(text.code, text.stderr).toBe(0)
    expect(text.stderr).toMatch(
      /^dsh: warning: budget compaction failed \(the turn goes on uncompacted\): .*\(COMPACTION_SUMMARIZER_FAILED\)\n$/,
    )
    expect(text.stdout).toContain('[turn completed]')
  })
})

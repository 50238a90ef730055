import { type ChildProcess, spawn } from 'node:child_process'
import { join } from 'node:path'
import { answer, type RecordedRequest, startModelServer } from '@dsh/driver-openai/testing'
import { describe, expect, it } from 'vitest'
import { compactionEvents, conversation, isSummarize, model, scratch } from './support/conversation.js'
import { cleanEnv, DSH_BIN, dshRun, history } from './support/dsh-process.js'

// `dsh compact` as a user runs it: the built CLI in its own process, a local
// Chat Completions server (the only fake) writing the summaries.
const worker = join(import.meta.dirname, 'support', 'compact-worker.mjs')
const KEY = 'sk-e2e-5c1d9e7a2b4f'

const t = scratch('dsh-compact-')
const env = (): NodeJS.ProcessEnv => cleanEnv({ DSH_API_KEY: KEY })
const dsh = (args: readonly string[]) => dshRun(args, env())

function spawned(args: string[]): { child: ChildProcess; output: () => string; exited: Promise<unknown> } {
  const child = spawn(process.execPath, args, { env: env(), stdio: ['ignore', 'pipe', 'pipe'] })
  let output = ''
  child.stdout!.on('data', (part: Buffer) => (output += part.toString()))
  child.stderr!.on('data', (part: Buffer) => (output += part.toString()))
  return { child, output: () => output, exited: new Promise((resolve) => child.on('exit', resolve)) }
}

/** Resolves when `child` has written `line` (an event the child reports, not a timer). */
function printed(p: ReturnType<typeof spawned>, line: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const check = (): void => {
      if (p.output().split('\n').includes(line)) resolve()
    }
    p.child.stdout!.on('data', check)
    p.child.on('exit', () => reject(new Error(`exited before '${line}': ${p.output()}`)))
    check()
  })
}

const summarizeRequests = () => t.server!.requests.filter(isSummarize)
/** The user prompts a summarize request carried (the messages it shadowed). */
const shadowedPrompts = (request: RecordedRequest) =>
  request.body.messages
    .slice(0, -1)
    .filter((m) => m.role === 'user')
    .map((m) => m.content)

describe('dsh compact', () => {
  it('summarizes the older context; the log keeps every event; the next turn is built from the compacted context', async () => {
    t.server = await startModelServer(model(() => answer(['The user asked ', 'two questions.'])))
    const id = await conversation(t.server, t.root, env())
    const before = await history(id, t.root, env())
    const compacted = await dsh(['compact', id, '--keep', '2', '--root', t.root, '--base-url', t.server.baseURL])
    expect(compacted.code, compacted.stdout + compacted.stderr).toBe(0)
    expect(compacted.stdout).toMatch(new RegExp(`^compacted ${id}: 4 message\\(s\\)`))
    expect(compacted.stderr.match(/dsh: compaction \w+/g)).toEqual([
      'dsh: compaction started',
      'dsh: compaction summarized',
      'dsh: compaction ended',
    ])
    expect(shadowedPrompts(summarizeRequests()[0]!)).toEqual(['first question', 'second question'])

    const after = await history(id, t.root, env())
    expect(after.slice(0, before.length)).toEqual(before)
    expect(compactionEvents(after)).toEqual([
      ['compaction/start', undefined],
      ['compaction/summary', undefined],
      ['compaction/end', undefined],
    ])

    const next = await dsh(['run', '--resume', id, 'fourth question', '--root', t.root, '--base-url', t.server.baseURL])
    expect(next.code, next.stdout + next.stderr).toBe(0)
    const request = t.server.requests.at(-1)!
    expect(request.body.messages[0]!.content).toContain('The user asked two questions.')
    const sent = JSON.stringify(request.body.messages)
    expect(sent).not.toContain('first question')
    expect(sent).toContain('third question')
  })

  it('a summarizer failure (the model server refuses the request) exits 1 typed; the log records it and the context is unchanged', async () => {
    t.server = await startModelServer(model(() => ({ kind: 'error', status: 400, message: 'context too long' })))
    const id = await conversation(t.server, t.root, env())
    const failed = await dsh(['compact', id, '--root', t.root, '--base-url', t.server.baseURL, '--keep', '0'])
    expect(failed.code).toBe(1)
    expect(failed.stderr).toContain('COMPACTION_SUMMARIZER_FAILED')
    expect(compactionEvents(await history(id, t.root, env()))).toEqual([
      ['compaction/start', undefined],
      ['compaction/end', expect.stringContaining('context too long')],
    ])
  })

  it('is refused with SESSION_PERSISTENCE_LOCKED while another process writes the session', async () => {
    t.server = await startModelServer(model(() => ({ kind: 'stream', hangAfter: 0 })))
    const id = await conversation(t.server, t.root, env())
    // A second process holds the session's writer lock: it is compacting, its summary held by the model.
    const holder = spawned([DSH_BIN, 'compact', id, '--root', t.root, '--base-url', t.server.baseURL])
    await t.server.hung()
    const refused = await dsh(['compact', id, '--root', t.root, '--base-url', t.server.baseURL])
    expect(refused.code).toBe(1)
    expect(refused.stderr).toContain('SESSION_PERSISTENCE_LOCKED')
    holder.child.kill('SIGKILL')
    await holder.exited
  })

  for (const stage of ['started', 'summarized'] as const) {
    it(`a process SIGKILLed after compaction/${stage === 'started' ? 'start' : 'summary'} leaves no half state: after a restart the context is the one before, and the next compaction succeeds`, async () => {
      // The first summary is held (the model never answers it) or answered, then the process stops at `stage`.
      t.server = await startModelServer(
        model((n) => (n === 1 && stage === 'started' ? { kind: 'stream', hangAfter: 0 } : answer([`summary ${n}`]))),
      )
      const id = await conversation(t.server, t.root, env())
      // After the start the model holds the summary (the pending request); after the summary the worker holds.
      const running = spawned([worker, t.root, id, t.server.baseURL, stage === 'started' ? '-' : stage])
      await printed(running, stage)
      if (stage === 'started') await t.server.hung()
      running.child.kill('SIGKILL')
      await running.exited
      const killed = compactionEvents(await history(id, t.root, env()))
      expect(killed).toEqual(
        stage === 'started'
          ? [['compaction/start', undefined]]
          : [
              ['compaction/start', undefined],
              ['compaction/summary', undefined],
            ],
      )

      // The restart: loading the session closes the compaction; the summary (if any) was never applied,
      // so the next compaction is asked about the original messages, and it succeeds.
      const again = await dsh(['compact', id, '--keep', '2', '--root', t.root, '--base-url', t.server.baseURL])
      expect(again.code, again.stdout + again.stderr).toBe(0)
      const retry = summarizeRequests().at(-1)!
      expect(shadowedPrompts(retry)).toEqual(['first question', 'second question'])
      expect(compactionEvents(await history(id, t.root, env()))).toEqual([
        ...killed,
        ['compaction/end', 'interrupted'],
        ['compaction/start', undefined],
        ['compaction/summary', undefined],
        ['compaction/end', undefined],
      ])
      const next = await dsh(['run', '--resume', id, 'fourth question', '--root', t.root, '--base-url', t.server.baseURL])
      expect(next.code, next.stdout + next.stderr).toBe(0)
      expect(t.server.requests.at(-1)!.body.messages[0]!.content).toContain(`summary ${summarizeRequests().length}`)
    })
  }
})

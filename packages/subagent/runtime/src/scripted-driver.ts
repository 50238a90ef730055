import { isDshError } from '@dsh/context'
import type { JsonValue, TokenUsage } from '@dsh/session'
import type { SubagentDriver, SubagentRun, SubagentRunOutcome } from './driver.js'

/** What a `call` step's tool produced, in the order the calls ran. */
export interface ScriptedCallResult {
  readonly name: string
  /** The tool's resolved output (lossless JSON), or the error body when it failed. */
  readonly content: JsonValue
  readonly isError: boolean
}

/** One scripted step of a turn. */
export type ScriptStep =
  /** Streams one `assistant/chunk` (indices count up within the turn). */
  | { readonly kind: 'chunk'; readonly text: string }
  /**
   * One model call: `step/start {model, provider}` (each when given, else
   * the child's `model` setting or the driver's `model`), then `step/end
   * {usage, finish: 'stop'}`; budgets count the usage. Aborted as it
   * starts, it ends `step/end {finish: 'aborted'}` and the turn `cancelled`.
   */
  | { readonly kind: 'step'; readonly usage?: TokenUsage; readonly model?: string; readonly provider?: string }
  /** Appends the `assistant/message` (the run's final text is the last one). */
  | { readonly kind: 'message'; readonly text: string; readonly usage?: { readonly input: number; readonly output: number } }
  /** Appends a `tool/call` and a scripted `tool/result` (no tool runs). */
  | {
      readonly kind: 'tool'
      readonly name: string
      readonly arguments?: JsonValue
      readonly result?: JsonValue
      readonly isError?: boolean
    }
  /**
   * Calls a real tool from `run.tools`, as a model-driven driver would:
   * `tool/call`, `execute`, then `tool/result` (a failure or an unknown tool is
   * an `isError` result with `{ code, message }`). `arguments` may be computed
   * from the results of the earlier `call` steps of this run.
   */
  | {
      readonly kind: 'call'
      readonly name: string
      readonly arguments?: JsonValue | ((previous: readonly ScriptedCallResult[]) => JsonValue)
    }
  /** Holds the turn open for `ms` (interruptible). */
  | { readonly kind: 'wait'; readonly ms: number }
  /** Holds the turn open until `promise` settles (interruptible): lets tests observe a running child. */
  | { readonly kind: 'until'; readonly promise: PromiseLike<unknown> }
  /** Appends an arbitrary event (the demo uses it to write damaged data on purpose). */
  | { readonly kind: 'event'; readonly type: string; readonly data: JsonValue }
  /** Ends the turn with `reason: 'error'`. */
  | { readonly kind: 'fail'; readonly message: string }

export type Script = readonly ScriptStep[] | ((run: SubagentRun) => readonly ScriptStep[])

export interface ScriptedDriverOptions {
  /** Pause between steps, in ms (default 0: one macrotask, so observers can interleave). */
  readonly stepDelayMs?: number
  /** The provider and model its `step` steps name by default (the driver's `model`). */
  readonly model?: { readonly provider: string; readonly model: string }
}

/** The default script: one chunk and one message that echo the prompt. */
const echoScript: Script = (run) => {
  const text = run.prompt === undefined ? 'Done.' : `Done: ${run.prompt}`
  return [
    { kind: 'chunk', text },
    { kind: 'message', text },
  ]
}

/**
 * A driver that plays a fixed script instead of calling a model: no model is
 * called anywhere in this project. Every step yields to the event loop, so a
 * listing started mid-run sees the child running. A script function sees the
 * whole run (prompt, notices, tools), so a scripted parent can delegate with
 * `call` steps and react to its children's notices.
 */
export function createScriptedDriver(script: Script = echoScript, options: ScriptedDriverOptions = {}): SubagentDriver {
  const stepDelayMs = options.stepDelayMs ?? 0
  const defaults = options.model
  return {
    name: 'scripted',
    ...(defaults === undefined ? {} : { model: defaults }),
    async run(run: SubagentRun): Promise<SubagentRunOutcome> {
      const { session, turn, signal } = run
      const steps = typeof script === 'function' ? script(run) : script
      session.append('turn/start', { turn })
      let chunkIndex = 0
      let text: string | undefined
      let callIndex = 0
      const calls: ScriptedCallResult[] = []
      const end = (reason: 'completed' | 'cancelled' | 'error', error?: unknown): SubagentRunOutcome => {
        session.append('turn/end', { turn, reason })
        return { reason, ...(text === undefined ? {} : { text }), ...(error === undefined ? {} : { error }) }
      }
      try {
        for (const step of steps) {
          if (!(await pause(stepDelayMs, signal))) return end('cancelled')
          switch (step.kind) {
            case 'chunk':
              session.append('assistant/chunk', { turn, index: chunkIndex++, delta: step.text })
              break
            case 'step': {
              const model = step.model ?? run.settings?.model ?? defaults?.model
              const provider = step.provider ?? defaults?.provider
              session.append('step/start', {
                ...(model === undefined ? {} : { model }),
                ...(provider === undefined ? {} : { provider }),
              })
              // Stopped as the call began (a budget with nothing left): the call is aborted and reports no usage.
              if (signal.aborted) {
                session.append('step/end', { finish: 'aborted' })
                return end('cancelled')
              }
              session.append('step/end', { ...(step.usage === undefined ? {} : { usage: { ...step.usage } }), finish: 'stop' })
              break
            }
            case 'message':
              text = step.text
              session.append('assistant/message', {
                turn,
                text: step.text,
                ...(step.usage === undefined ? {} : { usage: { ...step.usage } }),
              })
              break
            case 'tool': {
              const callId = `call-${turn}-${++callIndex}`
              session.append('tool/call', { turn, callId, name: step.name, arguments: step.arguments ?? {} })
              session.append('tool/result', {
                turn,
                callId,
                content: step.result ?? null,
                ...(step.isError === undefined ? {} : { isError: step.isError }),
              })
              break
            }
            case 'call': {
              const callId = `call-${turn}-${++callIndex}`
              const args = typeof step.arguments === 'function' ? step.arguments(calls) : (step.arguments ?? {})
              session.append('tool/call', { turn, callId, name: step.name, arguments: args })
              const result = await callTool(run, step.name, args)
              calls.push({ name: step.name, ...result })
              if (session.closed) return { reason: 'cancelled', ...(text === undefined ? {} : { text }) }
              session.append('tool/result', { turn, callId, content: result.content, ...(result.isError ? { isError: true } : {}) })
              break
            }
            case 'wait':
              if (!(await pause(step.ms, signal))) return end('cancelled')
              break
            case 'until':
              if (!(await until(step.promise, signal))) return end('cancelled')
              break
            case 'event':
              session.append(step.type, step.data)
              break
            case 'fail':
              return end('error', new Error(step.message))
          }
        }
        if (signal.aborted) return end('cancelled')
        return end('completed')
      } catch (error) {
        // An append can fail (e.g. invalid data in an 'event' step); close the turn if we still can.
        if (!session.closed && session.openTurnBefore() === turn) return end('error', error)
        return { reason: 'error', error }
      }
    },
  }
}

async function callTool(run: SubagentRun, name: string, args: JsonValue): Promise<{ content: JsonValue; isError: boolean }> {
  const tool = run.tools.find((candidate) => candidate.name === name)
  if (tool === undefined) {
    return {
      content: { code: 'TOOL_UNKNOWN', message: `No tool named ${JSON.stringify(name)} is available to this agent.` },
      isError: true,
    }
  }
  try {
    const output = await tool.execute(args, { agent: run.session, signal: run.signal })
    return { content: (output === undefined ? null : JSON.parse(JSON.stringify(output))) as JsonValue, isError: false }
  } catch (error) {
    const code = isDshError(error) ? error.code : 'TOOL_FAILED'
    return { content: { code, message: error instanceof Error ? error.message : String(error) }, isError: true }
  }
}

/** Resolves true after `ms` (at least one macrotask), false as soon as `signal` aborts. */
function pause(ms: number, signal: AbortSignal): Promise<boolean> {
  if (signal.aborted) return Promise.resolve(false)
  return new Promise((resolve) => {
    const onAbort = (): void => {
      clearTimeout(timer)
      resolve(false)
    }
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort)
      resolve(!signal.aborted)
    }, ms)
    signal.addEventListener('abort', onAbort, { once: true })
  })
}

function until(promise: PromiseLike<unknown>, signal: AbortSignal): Promise<boolean> {
  if (signal.aborted) return Promise.resolve(false)
  return new Promise((resolve) => {
    const onAbort = (): void => resolve(false)
    signal.addEventListener('abort', onAbort, { once: true })
    const settle = (): void => {
      signal.removeEventListener('abort', onAbort)
      resolve(!signal.aborted)
    }
    promise.then(settle, settle)
  })
}

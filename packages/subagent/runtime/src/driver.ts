import type { Session, TurnEndReason } from '@dsh/session'
import type { SubagentDescriptor } from './descriptor.js'
import type { SubagentNotice } from './lifecycle.js'
import type { SubagentSettings } from './options.js'
import type { SubagentIdentityProjection } from './projection-types.js'

/**
 * A tool an agent's driver may call (the `@dsh/tool-subagent-control` tools
 * have this shape). The driver offers `name`, `description` and `jsonSchema`
 * to its model and runs `execute` when the model calls the tool.
 */
export interface SubagentTool {
  readonly name: string
  /** What the tool does, written for a model. */
  readonly description: string
  /** The input's JSON Schema (draft 2020-12, as `z.toJSONSchema` emits it). */
  readonly jsonSchema: object
  /**
   * Validates `input` itself and rejects with a typed error (`code` +
   * actionable message) when it cannot act. Resolves structured output; a
   * `text` field, when present, is what the model should read.
   */
  execute(input: unknown, context: { readonly agent: Session; readonly signal?: AbortSignal }): Promise<unknown>
}

/**
 * One run of an agent: a child's spawn, resume or queued-message delivery, or
 * a turn of a top-level session (`drive`).
 */
export interface SubagentRun {
  readonly kind: 'spawn' | 'resume' | 'message' | 'drive'
  /** The live session the driver appends to. */
  readonly session: Session
  /** The child's identity as the `subagent` unit folds it; absent for a top-level `drive`. */
  readonly identity?: SubagentIdentityProjection
  /** The child's own descriptor as logged (mode, provider, label, a continuable's composition). Absent for a top-level `drive`. */
  readonly descriptor?: SubagentDescriptor
  /**
   * What the child runs with, from its descriptor and its `subagent/options`:
   * `persona`, `instructions`, `agentModel`/`model`, `agentProvider`,
   * `maxTurns`, `outputSchema`, `toolFilter`. Absent for a top-level `drive`.
   */
  readonly settings?: SubagentSettings
  /** The turn number to use for `turn/start` … `turn/end` (one above any turn already in the log). */
  readonly turn: number
  /** The input of this run; the runtime already appended it as `user/message`. */
  readonly prompt?: string
  /**
   * Notices from this agent's own children (settlements and reports) that
   * arrived since its previous turn started, oldest first. They are already in
   * the log as `subagent/notice` events; present them to the model as input.
   */
  readonly notices: readonly SubagentNotice[]
  /** The tools this agent may call, already narrowed by its settings' `toolFilter`. */
  readonly tools: readonly SubagentTool[]
  /** Aborted by interrupt, close, drain or runtime disposal: end the turn with `reason: 'cancelled'` promptly. */
  readonly signal: AbortSignal
}

export interface SubagentRunOutcome {
  readonly reason: TurnEndReason
  /** The final assistant text, when the driver produced one. */
  readonly text?: string
  /** Why the run failed, when `reason` is `error` (or the output failed its schema: `SUBAGENT_INVALID_OUTPUT`). */
  readonly error?: unknown
  /** A one-shot child's final text parsed as JSON, when it passed its `outputSchema`. */
  readonly output?: unknown
}

/**
 * The one thing a runtime implements to plug a model in.
 *
 * `run` receives a {@link SubagentRun} — the live session, the prompt (already
 * logged as `user/message`), the notices from the agent's children, the tools
 * it may call, the child's settings (persona, instructions, model), and an abort
 * signal — and must append, in order:
 *
 * 1. `turn/start {turn: run.turn}`;
 * 2. any `assistant/chunk {turn, index, delta}` (index counts up within the
 *    turn) and `assistant/message {turn, text, usage?}` (the last one is the
 *    run's result);
 * 3. for every tool the model calls: `tool/call {turn, callId, name, arguments}`,
 *    then `execute` with `{ agent: run.session, signal: run.signal }`, then
 *    exactly one `tool/result {turn, callId, content, isError?}` — an error
 *    (typed or not) becomes `isError: true` with its code and message, never
 *    a thrown run;
 * 4. `turn/end {turn, reason}` and resolve `{ reason, text? }`.
 *
 * When `signal` aborts, finish promptly with `reason: 'cancelled'`. A driver
 * must not append `subagent/*` events (the runtime owns the lifecycle) and
 * should ignore them when it builds model context from the log. If `run`
 * throws or leaves the turn open, the runtime closes it (`reason: 'error'`).
 */
export interface SubagentDriver {
  /** Written into descriptors as the default `provider`. */
  readonly name: string
  /**
   * The provider and model its steps name in `step/start` when a child's
   * settings name no model: a cost budget is priced by them at spawn. A
   * driver without it leaves a cost budget to the child's `model` setting.
   */
  readonly model?: { readonly provider: string; readonly model: string }
  run(run: SubagentRun): Promise<SubagentRunOutcome>
}

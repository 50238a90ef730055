import { readFileSync, statSync } from 'node:fs'
import { basename, extname } from 'node:path'
import { MODEL_APIS, type ModelApi } from '@dsh/driver-openai'
import { ATTACHMENT_MAX_BYTES } from '@dsh/session-persistence'
import type { ParsedCommand } from '../command.js'
import { CliError } from '../errors.js'

/** The image types `--image` takes, by file extension (what the Chat, Responses and Anthropic image inputs accept). */
export const IMAGE_TYPES: Readonly<Record<string, string>> = {
  '.png': 'image/png',
  '.jpg': 'image/jpeg',
  '.jpeg': 'image/jpeg',
  '.gif': 'image/gif',
  '.webp': 'image/webp',
}

/** `--api chat|responses` (default `chat`); anything else is `CLI_USAGE`. */
export function modelApiOf(command: ParsedCommand): ModelApi | undefined {
  const value = command.string('api')
  if (value === undefined) return undefined
  if (!(MODEL_APIS as readonly string[]).includes(value))
    throw new CliError('CLI_USAGE', `--api must be one of ${MODEL_APIS.join(', ')}, got '${value}'.`)
  return value as ModelApi
}

/** An image to attach to the prompt: its bytes, media type and file name. */
export interface ImageInput {
  readonly bytes: Uint8Array
  readonly mediaType: string
  readonly name: string
}

/**
 * `--image PATH`: the file read whole, its media type from the extension.
 * A missing or unreadable file, a directory, another extension, or a file
 * over the persistence's attachment cap (`ATTACHMENT_MAX_BYTES`, measured
 * with stat before the file is read, and again on the bytes read) is
 * `CLI_USAGE`, before the root is touched: the session would be created
 * first and its append refused, leaving it empty.
 */
export function imageOf(command: ParsedCommand): ImageInput | undefined {
  const path = command.string('image')
  if (path === undefined) return undefined
  const mediaType = IMAGE_TYPES[extname(path).toLowerCase()]
  if (mediaType === undefined)
    throw new CliError('CLI_USAGE', `--image takes a ${Object.keys(IMAGE_TYPES).join(', ')} file, got '${path}'.`)
  let bytes: Uint8Array
  try {
    const stats = statSync(path)
    if (!stats.isFile()) throw new Error('not a regular file')
    tooLarge(path, stats.size)
    bytes = readFileSync(path)
  } catch (error) {
    if (error instanceof CliError) throw error
    throw new CliError('CLI_USAGE', `--image '${path}' cannot be read: ${error instanceof Error ? error.message : String(error)}.`)
  }
  // The file may have grown since it was measured.
  tooLarge(path, bytes.byteLength)
  return { bytes, mediaType, name: basename(path) }
}

function tooLarge(path: string, size: number): void {
  if (size > ATTACHMENT_MAX_BYTES)
    throw new CliError(
      'CLI_USAGE',
      `--image '${path}' is ${size} bytes, over the attachment cap of ${ATTACHMENT_MAX_BYTES} bytes (${ATTACHMENT_MAX_BYTES / (1024 * 1024)} MiB); attach a smaller file.`,
    )
}

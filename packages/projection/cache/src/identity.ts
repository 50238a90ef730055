import { SESSION_HEADER_WITNESS_FIELDS, type SessionHeader } from '@dsh/session'

/**
 * The lifecycle witness of a checkpoint: every header witness field, in a
 * fixed order. Two headers with the same id but any other field different
 * belong to different lifecycles and never share a row. The exact cut is kept
 * beside it, in its own column.
 *
 * Every cached lookup computes it, so it is a cheap self-delimiting encoding
 * rather than JSON: a string is `s<length>:<text>` (its length says where it
 * ends, so no content can forge a field boundary and nothing needs escaping),
 * a number `n<digits>`, a boolean `b<true|false>`, an absent field `-`.
 */
export function checkpointIdentity(header: SessionHeader): string {
  let identity = ''
  for (const field of SESSION_HEADER_WITNESS_FIELDS) {
    const value = header[field]
    if (value === undefined) identity += '-'
    else if (typeof value === 'string') identity += `s${value.length}:${value}`
    else if (typeof value === 'number') identity += `n${value}`
    else identity += `b${value}`
  }
  return identity
}

/**
 * The witness every stored payload starts with: identity, cut and unit
 * stateVersion. Each part is self-delimiting (the identity is, and the two
 * integers end at `|` and a newline), so a payload starts with this exact
 * text if and only if it was written for this lifecycle, cut and version.
 * A lookup then needs one primary-key read of one column to decide hit or miss.
 */
export function rowWitness(identity: string, inheritedEventCount: number, stateVersion: number): string {
  return `${identity}|${inheritedEventCount}|${stateVersion}\n`
}

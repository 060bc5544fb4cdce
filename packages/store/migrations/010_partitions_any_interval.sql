-- 010: partitions of `messages` and `message_events` of any size (daily by default), so the
-- tracker can drop a day's rows as a unit once REACH_RETENTION_MESSAGES has passed (issue 26:
-- bounded storage; monthly partitions kept up to a month more than asked, and nothing dropped them).
--
-- Partition boundaries are multiples of the interval since the UNIX epoch, in UTC: a one-day
-- interval gives UTC days, and every service computes the same boundaries whatever its TimeZone.
-- Names: <table>_pYYYYMMDD for whole-day intervals, <table>_pYYYYMMDD_HHMMSS otherwise.

-- reach_partition_bounds(parent): the partitions of `parent` with their range (the DEFAULT
-- partition excluded). pg_get_expr prints the bounds with their UTC offset, so the text casts
-- back to the same instants whatever the session's TimeZone.
CREATE FUNCTION reach_partition_bounds(parent text)
RETURNS TABLE (part text, lo timestamptz, hi timestamptz)
LANGUAGE sql STABLE
AS $fn$
  SELECT c.relname::text,
         substring(pg_get_expr(c.relpartbound, c.oid) FROM $re$FROM \('([^']+)'\)$re$)::timestamptz,
         substring(pg_get_expr(c.relpartbound, c.oid) FROM $re$TO \('([^']+)'\)$re$)::timestamptz
    FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
   WHERE i.inhparent = parent::regclass
     AND pg_get_expr(c.relpartbound, c.oid) <> 'DEFAULT'
$fn$;

-- reach_ensure_partitions_every(step_s, from_at, slots): creates the partitions of both tables
-- for `slots` intervals of `step_s` seconds, the first one holding `from_at`; returns the names
-- it created. A slot that an existing partition overlaps (the monthly partitions of 001 still
-- holding rows, or partitions of another interval before REACH_PARTITION_INTERVAL changed) is
-- skipped: its rows go to the DEFAULT partition, which the tracker's retention empties.
-- Idempotent, and serialised with reach_ensure_partitions by the same advisory lock. As in 001,
-- rows the DEFAULT partition holds for a new range are moved into it before it is attached.
CREATE FUNCTION reach_ensure_partitions_every(step_s integer, from_at timestamptz, slots integer)
RETURNS SETOF text
LANGUAGE plpgsql
AS $fn$
DECLARE
  parent   text;
  part     text;
  slot_lo       timestamptz;
  slot_hi       timestamptz;
  first_lo double precision;
  cols     text;
  i        integer;
BEGIN
  IF step_s IS NULL OR step_s < 1 THEN
    RAISE EXCEPTION 'reach_ensure_partitions_every: step_s must be >= 1, got %', step_s;
  END IF;
  IF slots IS NULL OR slots < 0 THEN
    RAISE EXCEPTION 'reach_ensure_partitions_every: slots must be >= 0, got %', slots;
  END IF;
  PERFORM pg_advisory_xact_lock(8243101772546048002);
  first_lo := floor(extract(epoch FROM from_at) / step_s) * step_s;

  FOR i IN 0 .. slots - 1 LOOP
    slot_lo := to_timestamp(first_lo + i::double precision * step_s);
    slot_hi := to_timestamp(first_lo + (i + 1)::double precision * step_s);
    FOREACH parent IN ARRAY ARRAY['messages', 'message_events'] LOOP
      part := parent || '_p' || to_char(slot_lo AT TIME ZONE 'UTC', 'YYYYMMDD')
              || CASE WHEN step_s % 86400 = 0 THEN '' ELSE to_char(slot_lo AT TIME ZONE 'UTC', '"_"HH24MISS') END;
      CONTINUE WHEN to_regclass(quote_ident(part)) IS NOT NULL;
      CONTINUE WHEN EXISTS (SELECT 1 FROM reach_partition_bounds(parent) b WHERE b.lo < slot_hi AND b.hi > slot_lo);

      EXECUTE format('CREATE TABLE %I (LIKE %I INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING GENERATED)',
                     part, parent);
      SELECT string_agg(quote_ident(a.attname), ', ' ORDER BY a.attnum) INTO cols
        FROM pg_attribute a
       WHERE a.attrelid = parent::regclass AND a.attnum > 0
         AND NOT a.attisdropped AND a.attgenerated = '';
      EXECUTE format(
        'WITH moved AS (DELETE FROM %I WHERE created_at >= $1 AND created_at < $2 RETURNING %s) '
        'INSERT INTO %I (%s) SELECT %s FROM moved',
        parent || '_default', cols, part, cols, cols)
      USING slot_lo, slot_hi;
      EXECUTE format('ALTER TABLE %I ATTACH PARTITION %I FOR VALUES FROM (%L) TO (%L)',
                     parent, part, slot_lo, slot_hi);
      RETURN NEXT part;
    END LOOP;
  END LOOP;
END
$fn$;

-- The monthly partitions 001 created ahead are empty on a fresh database (and those of the
-- coming months on any database): they would block the daily ones for months. Drop the empty
-- ones; one holding rows stays until the tracker's retention drops it as a whole.
DO $do$
DECLARE
  p text;
  has_rows boolean;
BEGIN
  FOR p IN SELECT b.part FROM reach_partition_bounds('messages') b
           UNION ALL SELECT b.part FROM reach_partition_bounds('message_events') b LOOP
    CONTINUE WHEN p !~ '_y[0-9]{4}m[0-9]{2}$';
    -- the lock keeps a writer from adding a row between the look and the drop
    EXECUTE format('LOCK TABLE %I IN ACCESS EXCLUSIVE MODE', p);
    EXECUTE format('SELECT EXISTS (SELECT 1 FROM %I)', p) INTO has_rows;
    IF NOT has_rows THEN
      EXECUTE format('DROP TABLE %I', p);
    END IF;
  END LOOP;
END
$do$;

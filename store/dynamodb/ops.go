package dynamodb

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/store"
)

// The conditions of the writes. :now is the Store's clock: a record whose
// deadline (#e, written with the skew allowance in it) is at or before it
// is over.
const (
	// A claim of a key with no item.
	freshCond = "attribute_not_exists(#k)"
	// A takeover: the item is still the record the claim read (the same
	// token, deadline, status and fence: every write that acquires a key
	// gives it a new fence, and every other write moves its deadline or
	// its status), and that record is over.
	takeoverCond        = "#t = :ptok AND #e = :pe AND #s = :ps AND #n = :pn AND #e <= :now"
	takeoverCondNoFence = "#t = :ptok AND #e = :pe AND #s = :ps AND attribute_not_exists(#n) AND #e <= :now"
	// A re-entrant claim: the caller's own live lease, with the fence read.
	reentrantCond        = "#s = :inprog AND #t = :tok AND #e > :now AND #n = :pn"
	reentrantCondNoFence = "#s = :inprog AND #t = :tok AND #e > :now AND attribute_not_exists(#n)"
	// Release and Renew: the token's live lease.
	liveLeaseCond = "#s = :inprog AND #t = :tok AND #e > :now"
	// Complete: the token's lease (a lapsed one too, while no claim took it over).
	holderCond     = "#s = :inprog AND #t = :tok"
	completeUpdate = "SET #s = :done, #e = :e, #ttl = :ttl, #r = :r REMOVE #l"
	completeNoResp = "SET #s = :done, #e = :e, #ttl = :ttl REMOVE #l"
	// A lease extended (Renew, a re-entrant Claim): attempt and fence stay.
	extendUpdate = "SET #l = :until, #e = :until, #ttl = :ttl"
)

var (
	inProgressValue = attrN(statusInProgress)
	completedValue  = attrN(statusCompleted)
)

// Claim implements store.Store with conditional writes that decide on the
// item as it is. The first is a PutItem of a new record (Attempt 1, Fence
// the Store's clock in microseconds) conditional on the key having no item,
// so a new key costs one write. When that is refused, the item DynamoDB
// returns with the refusal (ReturnValuesOnConditionCheckFailure), or one
// strongly consistent GetItem where the server returns none, says what
// holds the key: a live record is Mismatch, Completed or InProgress (or the
// caller's own lease, extended by an UpdateItem conditional on it still
// being that lease), and a record that is over is taken over by a PutItem
// whose Attempt and Fence store.Successor computes from it, conditional on
// the item still being exactly that record and over. A refused write is
// explained again, up to maxAttempts times.
func (s *Store) Claim(ctx context.Context, key, fingerprint string, token store.Token, lease time.Duration) (store.Claim, error) {
	if err := store.CheckClaim(key, fingerprint, token, lease); err != nil {
		return store.Claim{}, fmt.Errorf("dynamodb: claim: %w", err)
	}
	var prev store.Record // the record the key holds, as last read
	found := false        // whether there is one: the first write assumes none
	for range maxAttempts {
		now := s.now()
		until := s.deadline(now, lease)
		var item map[string]types.AttributeValue
		var err error
		if found && s.live(prev, now) {
			switch {
			case prev.Fingerprint != fingerprint:
				return store.Claim{Outcome: store.Mismatch, Record: prev}, nil
			case prev.Status == store.StatusCompleted:
				return store.Claim{Outcome: store.Completed, Record: prev}, nil
			case prev.Token != token:
				return store.Claim{Outcome: store.InProgress, Record: prev}, nil
			}
			// The caller's own live lease: extend it, attempt and fence kept.
			item, err = s.extend(ctx, key, token, now, until, &prev)
			if err == nil {
				r := prev
				r.LockedUntil, r.ExpiresAt = until, until
				return store.Claim{Outcome: store.Acquired, Record: r}, nil
			}
		} else {
			attempt, fence := store.Successor(prev, found, token, now)
			item, err = s.put(ctx, key, fingerprint, token, until, attempt, fence, now, prev, found)
			if err == nil {
				return store.Claim{Outcome: store.Acquired, Record: store.Record{
					Key: key, Fingerprint: fingerprint, Status: store.StatusInProgress, Token: token,
					LockedUntil: until, ExpiresAt: until, Attempt: attempt, Fence: fence,
				}}, nil
			}
		}
		var ccf *types.ConditionalCheckFailedException
		if !errors.As(err, &ccf) {
			return store.Claim{}, fmt.Errorf("dynamodb: claim: %w", err)
		}
		if prev, found, err = s.explain(ctx, key, item); err != nil {
			return store.Claim{}, fmt.Errorf("dynamodb: claim: %w", err)
		}
	}
	return store.Claim{}, fmt.Errorf("dynamodb: claim: key %q changed %d times while being claimed", key, maxAttempts)
}

// put writes a new lease for token, conditional on the key having no item
// (found false) or on its item still being prev, over at now. On a refusal
// it returns the item DynamoDB handed back with it, if any.
func (s *Store) put(ctx context.Context, key, fingerprint string, token store.Token, until time.Time,
	attempt uint32, fence uint64, now time.Time, prev store.Record, found bool) (map[string]types.AttributeValue, error) {
	item := map[string]types.AttributeValue{
		attrKey:         attrS(key),
		attrToken:       attrS(string(token)),
		attrStatus:      inProgressValue,
		attrLockedUntil: attrTime(until),
		attrExpiresAt:   attrTime(until),
		attrTTL:         s.leaseTTL(until),
		attrAttempt:     attrUint(uint64(attempt)),
		attrFence:       attrUint(fence),
	}
	if fingerprint != "" {
		item[attrFingerprint] = attrS(fingerprint)
	}
	in := &dynamodb.PutItemInput{
		TableName: s.table, Item: item,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
	if !found {
		in.ConditionExpression = aws.String(freshCond)
		in.ExpressionAttributeNames = namesFor("#k")
	} else {
		status := inProgressValue
		if prev.Status == store.StatusCompleted {
			status = completedValue
		}
		in.ExpressionAttributeValues = map[string]types.AttributeValue{
			":ptok": attrS(string(prev.Token)), ":pe": attrTime(prev.ExpiresAt), ":ps": status, ":now": attrTime(now),
		}
		in.ExpressionAttributeNames = namesFor("#t", "#e", "#s", "#n")
		in.ConditionExpression = aws.String(takeoverCondNoFence)
		if prev.Fence != 0 {
			in.ConditionExpression = aws.String(takeoverCond)
			in.ExpressionAttributeValues[":pn"] = attrUint(prev.Fence)
		}
	}
	err := s.retry(ctx, func(ctx context.Context) error {
		_, err := s.client.PutItem(ctx, in)
		return err
	})
	return refusedItem(err), err
}

// extend moves the end of token's live lease prev to until, conditional
// on the item still being that lease (its fence) and live at now.
func (s *Store) extend(ctx context.Context, key string, token store.Token, now, until time.Time, prev *store.Record) (map[string]types.AttributeValue, error) {
	update := extendUpdate
	values := map[string]types.AttributeValue{
		":inprog": inProgressValue, ":tok": attrS(string(token)), ":now": attrTime(now),
		":until": attrTime(until), ":ttl": s.leaseTTL(until),
	}
	cond := reentrantCondNoFence
	if prev.Fence != 0 {
		cond = reentrantCond
		values[":pn"] = attrUint(prev.Fence)
	}
	in := &dynamodb.UpdateItemInput{
		TableName: s.table, Key: keyOf(key), UpdateExpression: &update, ConditionExpression: &cond,
		ExpressionAttributeNames: namesFor("#s", "#t", "#e", "#n", "#l", "#ttl"), ExpressionAttributeValues: values,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
	err := s.retry(ctx, func(ctx context.Context) error {
		_, err := s.client.UpdateItem(ctx, in)
		return err
	})
	return refusedItem(err), err
}

// refusedItem returns the item a refused condition ran into, when the
// server handed it back (DynamoDB does, dynalite does not).
func refusedItem(err error) map[string]types.AttributeValue {
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return ccf.Item
	}
	return nil
}

// explain returns the record a refused write ran into: the item DynamoDB
// returned with the refusal or, when the server returned none, the item a
// strongly consistent read finds now.
func (s *Store) explain(ctx context.Context, key string, item map[string]types.AttributeValue) (store.Record, bool, error) {
	if len(item) == 0 {
		var err error
		if item, err = s.getItem(ctx, key); err != nil {
			return store.Record{}, false, err
		}
	}
	return decode(item)
}

func (s *Store) getItem(ctx context.Context, key string) (map[string]types.AttributeValue, error) {
	in := &dynamodb.GetItemInput{TableName: s.table, Key: keyOf(key), ConsistentRead: &consistent}
	var out *dynamodb.GetItemOutput
	err := s.retry(ctx, func(ctx context.Context) error {
		var err error
		out, err = s.client.GetItem(ctx, in)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out.Item, nil
}

var consistent = true

// Complete implements store.Store: one UpdateItem conditional on token
// holding the key in progress. A refusal is explained as Claim's is: a
// record completed by token is a retried Complete (nil); anything else is
// store.ErrLeaseLost (so is a record completed by token whose retention
// is over: the key is absent). A response longer than MaxResponseLen is
// store.ErrInvalid, before anything is written.
func (s *Store) Complete(ctx context.Context, key string, token store.Token, response []byte, retention time.Duration) error {
	if err := store.CheckComplete(key, token, retention); err != nil {
		return fmt.Errorf("dynamodb: complete: %w", err)
	}
	if len(response) > MaxResponseLen {
		return fmt.Errorf("dynamodb: complete: %w: response is %d bytes, longer than %d (DynamoDB items stop at 400 KB)",
			store.ErrInvalid, len(response), MaxResponseLen)
	}
	expires := s.deadline(s.now(), retention)
	update := completeNoResp
	values := map[string]types.AttributeValue{
		":inprog": inProgressValue, ":tok": attrS(string(token)), ":done": completedValue,
		":e": attrTime(expires), ":ttl": s.ttlOf(expires),
	}
	names := namesFor("#s", "#t", "#e", "#ttl", "#l")
	if len(response) > 0 {
		update = completeUpdate
		values[":r"] = attrB(response)
		names["#r"] = attrResponse
	}
	cond := holderCond
	in := &dynamodb.UpdateItemInput{
		TableName: s.table, Key: keyOf(key), UpdateExpression: &update, ConditionExpression: &cond,
		ExpressionAttributeNames: names, ExpressionAttributeValues: values,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
	err := s.retry(ctx, func(ctx context.Context) error {
		_, err := s.client.UpdateItem(ctx, in)
		return err
	})
	var ccf *types.ConditionalCheckFailedException
	if err == nil || !errors.As(err, &ccf) {
		return wrap("complete", err)
	}
	r, found, err := s.explain(ctx, key, ccf.Item)
	if err != nil {
		return fmt.Errorf("dynamodb: complete: %w", err)
	}
	if found && r.Status == store.StatusCompleted && r.Token == token && s.live(r, s.now()) {
		return nil // a retried Complete: the first response stays
	}
	return fmt.Errorf("dynamodb: complete: key %q: %w", key, store.ErrLeaseLost)
}

// Release implements store.Store: one DeleteItem conditional on token
// holding a live lease on the key (a lapsed lease stays, for the attempt
// count); a refusal changes nothing and is not an error.
func (s *Store) Release(ctx context.Context, key string, token store.Token) error {
	if err := store.CheckRelease(key, token); err != nil {
		return fmt.Errorf("dynamodb: release: %w", err)
	}
	cond := liveLeaseCond
	in := &dynamodb.DeleteItemInput{
		TableName: s.table, Key: keyOf(key), ConditionExpression: &cond,
		ExpressionAttributeNames: namesFor("#s", "#t", "#e"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":inprog": inProgressValue, ":tok": attrS(string(token)), ":now": attrTime(s.now()),
		},
	}
	err := s.retry(ctx, func(ctx context.Context) error {
		_, err := s.client.DeleteItem(ctx, in)
		return err
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return nil
	}
	return wrap("release", err)
}

// Renew implements store.Store: one UpdateItem of the lease's end,
// conditional on token holding a live lease on the key at the Store's
// clock. A refusal (no item, a lapsed lease, a completed record, another
// token's lease) writes nothing and is store.ErrLeaseLost; an UpdateItem
// whose condition fails never creates an item. Attempt and fence stay.
func (s *Store) Renew(ctx context.Context, key string, token store.Token, lease time.Duration) error {
	if err := store.CheckRenew(key, token, lease); err != nil {
		return fmt.Errorf("dynamodb: renew: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("dynamodb: renew: %w", err)
	}
	now := s.now()
	until := s.deadline(now, lease)
	update, cond := extendUpdate, liveLeaseCond
	in := &dynamodb.UpdateItemInput{
		TableName: s.table, Key: keyOf(key), UpdateExpression: &update, ConditionExpression: &cond,
		ExpressionAttributeNames: namesFor("#s", "#t", "#e", "#l", "#ttl"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":inprog": inProgressValue, ":tok": attrS(string(token)), ":now": attrTime(now),
			":until": attrTime(until), ":ttl": s.leaseTTL(until),
		},
	}
	err := s.retry(ctx, func(ctx context.Context) error {
		_, err := s.client.UpdateItem(ctx, in)
		return err
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return fmt.Errorf("dynamodb: renew: key %q: %w", key, store.ErrLeaseLost)
	}
	return wrap("renew", err)
}

// Get implements store.Store with one strongly consistent GetItem.
func (s *Store) Get(ctx context.Context, key string) (store.Record, error) {
	if err := store.CheckKey(key); err != nil {
		return store.Record{}, fmt.Errorf("dynamodb: get: %w", err)
	}
	item, err := s.getItem(ctx, key)
	if err != nil {
		return store.Record{}, fmt.Errorf("dynamodb: get: %w", err)
	}
	r, found, err := decode(item)
	if err != nil {
		return store.Record{}, fmt.Errorf("dynamodb: get: %w", err)
	}
	if !found || !s.live(r, s.now()) {
		return store.Record{}, fmt.Errorf("dynamodb: get: key %q: %w", key, store.ErrNotFound)
	}
	return r, nil
}

func wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("dynamodb: %s: %w", op, err)
}
